import Testing

@testable import KVOTestSupport

/// Checks a successful kvoclient run: exit 0 (not a signal), exactly `lines` on standard output, nothing on
/// standard error. Shared by the CLI suites.
func expectSuccess(_ result: KVOClientProcess.Result, lines: [String], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(result.status == 0, "stderr: \(result.stderr)", sourceLocation: sourceLocation)
    #expect(result.exitedNormally, sourceLocation: sourceLocation)
    #expect(result.lines == lines, sourceLocation: sourceLocation)
    #expect(result.stderr.isEmpty, sourceLocation: sourceLocation)
}
