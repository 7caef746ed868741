import CPCRE2

/// A property's `pattern`: its source text and the PCRE2 regular expression compiled from it once, when the
/// class is defined. Owned by the `ValueConstraints` of one property spec.
///
/// The dialect is PCRE2's (Perl-compatible) in UTF mode with Unicode properties (`\d`, `\w`, `\s` and
/// POSIX classes cover Unicode; `.` is one code point); `\C` is refused. A pattern is found anywhere in the
/// string unless it is anchored.
///
/// Matching is bounded (see `matches`): a catastrophic pattern such as `^(a+)+$` cannot hold the loop.
///
/// A class definition is shared between threads. This is safe because the compiled code is never mutated
/// after `init` (PCRE2 documents compiled patterns as shareable between threads for matching), and the
/// mutable matching state lives in the calling thread's own `PatternMatchScratch`: `@unchecked Sendable`.
final class CompiledPattern: @unchecked Sendable, Equatable {
    /// Longest pattern accepted, in bytes.
    static let maximumLength = 512
    /// The backtracking steps one whole match may take, over all the start positions it tries: the
    /// first match of a write; the k-th match of the same write gets `matchStepBudget / k`
    /// (`stepBudget(forMatch:)`).
    static let matchStepBudget = 1_000_000
    /// The memory one match's backtracking frames may take, in KiB (PCRE2's heap limit).
    static let heapLimitKiB = 8 * 1024
    /// How deeply one match may nest its backtracking (PCRE2's depth limit).
    static let depthLimit = 100_000

    /// The pattern as the client wrote it (what the canonical definition carries).
    let source: String
    /// The compiled pattern (`pcre2_code_8 *`), freed by `deinit`.
    private let code: OpaquePointer
    /// Whether PCRE2 tries the pattern at the start of the string only (it begins with `^` or `\A` in
    /// every top-level branch): then the whole step budget goes to that one start position.
    private let isAnchored: Bool

    /// How a string fared against a pattern.
    enum Match: Equatable {
        case matched
        case notMatched
        /// The match ran out of its work limit before it could tell.
        case exceededWorkLimit
    }

    /// Compiles `source`; the error says why it does not compile.
    init(_ source: String) throws(PatternError) {
        guard source.utf8.count <= CompiledPattern.maximumLength else {
            throw PatternError(reason: "is longer than \(CompiledPattern.maximumLength) bytes")
        }
        var errorCode: Int32 = 0
        var errorOffset = 0
        let options = PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C
        // withCString: never a null pointer, even for "" (which PCRE2 would refuse).
        let compiled = source.withCString { chars in
            kvod_pcre2_compile(chars, source.utf8.count, options, &errorCode, &errorOffset)
        }
        guard let compiled else {
            throw PatternError(reason: "does not compile: \(Self.message(for: errorCode)) at offset \(errorOffset)")
        }
        code = compiled
        isAnchored = kvod_pcre2_is_anchored(compiled) != 0
        self.source = source
    }

    deinit { pcre2_code_free_8(code) }

    /// Whether the pattern matches somewhere in `string` (anywhere, unless the pattern is anchored), on the
    /// calling thread's scratch.
    ///
    /// The work is bounded: PCRE2 limits the backtracking steps (calls of its internal match function) for
    /// each start position it tries. An anchored pattern (the usual validation rule, `^…$`) has one start
    /// position and gets the whole `matchStepBudget`; any other gets `matchStepBudget` divided by the
    /// number of start positions (the length in bytes + 1), at least 1: at most max(`matchStepBudget`,
    /// length + 1) steps in all either way. Memory is bounded by `heapLimitKiB` and `depthLimit`. Hitting any of them gives
    /// `exceededWorkLimit`.
    ///
    /// One write may check many strings (an `insert` of thousands of elements, each against `items`'s
    /// pattern): within a write (`PatternMatchScratch.beginWrite()`), the k-th match gets the k-th share
    /// of the budget, `matchStepBudget / k`, so all the matches of one write together take at most
    /// `matchStepBudget` x (1 + ln n) steps for n strings, about 14 x the budget for the most strings a
    /// 1 MiB value can hold, instead of n x the budget.
    func matches(_ string: String) -> Match {
        let scratch = PatternMatchScratch.current
        let length = string.utf8.count
        let budget = CompiledPattern.stepBudget(forMatch: scratch.countMatch())
        let perStartLimit = isAnchored ? budget : max(1, budget / (length + 1))
        pcre2_set_match_limit_8(scratch.context, UInt32(perStartLimit))
        // withCString: a native string's own bytes (no copy), never a null pointer, even for "".
        let result = string.withCString { chars in
            kvod_pcre2_match(code, chars, length, scratch.matchData, scratch.context)
        }
        if result >= 0 { return .matched }
        if result == kvod_pcre2_error_nomatch() { return .notMatched }
        return .exceededWorkLimit
    }

    /// The steps the `number`-th match of one write may take (1-based): `matchStepBudget / number`, at least 1.
    static func stepBudget(forMatch number: Int) -> Int {
        max(1, matchStepBudget / max(1, number))
    }

    /// PCRE2's message for an error code.
    private static func message(for errorCode: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        let length = kvod_pcre2_error_message(errorCode, &buffer, buffer.count)
        guard length > 0 else { return "error \(errorCode)" }
        return String(decoding: buffer[..<Int(length)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
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
