import Testing

/// `#expect(actual == expected)` as a plain generic function: the same check and the same report on failure
/// (both values, at the caller's line), at about half the compile time. Each `#expect` with an operator expands to a
/// closure the type checker solves against every `==` overload, about 0.02 s of CPU per use; the test targets
/// held about 3,400 of them (docs/design.md, "CI"). Plain `#expect` stays for every other check.
/// (KVOServerTests has its own copy: it does not depend on KVOTestSupport, whose tests are the client side's.)
func expectEqual<Value: Equatable>(_ actual: Value, _ expected: Value, _ comment: @autoclosure () -> Comment? = nil,
                                   sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(actual == expected, comment(), sourceLocation: sourceLocation)
}
