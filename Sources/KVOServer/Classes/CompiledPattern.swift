/// A property's `pattern`: its source text and the regular expression compiled from it once, when the
/// class is defined. Owned by the `ValueConstraints` of one property spec.
///
/// `Regex` is not `Sendable`, but a class definition is shared between threads. This is safe because the
/// regex is never mutated after `init` and matching does not change it: `@unchecked Sendable`.
final class CompiledPattern: @unchecked Sendable, Equatable {
    /// Longest pattern accepted, in bytes.
    static let maximumLength = 512

    /// The pattern as the client wrote it (what the canonical definition carries).
    let source: String
    private let regex: Regex<AnyRegexOutput>

    /// Compiles `source`; the error says why it does not compile.
    init(_ source: String) throws(PatternError) {
        guard source.utf8.count <= CompiledPattern.maximumLength else {
            throw PatternError(reason: "is longer than \(CompiledPattern.maximumLength) bytes")
        }
        do {
            regex = try Regex(source)
        } catch {
            throw PatternError(reason: "does not compile: \(error)")
        }
        self.source = source
    }

    /// Whether the pattern matches somewhere in `string` (anywhere, unless the pattern is anchored).
    func matches(_ string: String) -> Bool {
        string.contains(regex)
    }

    /// Patterns are equal when their source text is.
    static func == (lhs: CompiledPattern, rhs: CompiledPattern) -> Bool {
        lhs.source == rhs.source
    }

    /// Why a pattern was refused (completes "'pattern' ...").
    struct PatternError: Error {
        let reason: String
    }
}
