/// The work one evaluation may do, shared by everything it evaluates: the expression itself, and every
/// computed property it reads through key paths (nested, through references), so that a chain of computed
/// properties that each read the previous one many times (`c2 = c1 + c1 + …`) cannot multiply the work.
///
/// Work is counted in steps: one per expression node evaluated, plus steps for the strings an operation
/// copies (one per `copiedBytesPerStep` bytes appended by `+`), scans (one per `scannedBytesPerStep`
/// bytes a function or a comparison reads or builds: `upper`, `len`, `str`, `<`, …) or searches (one per
/// `searchedBytesPerStep` bytes of `contains`' haystack and needle, whose character-by-character search
/// costs far more per byte: 0.14 s for 512 KB in a release build). A computed
/// property served from the memo costs what evaluating it cost, so an evaluation's outcome never depends
/// on what the memo held. When the steps run out, evaluation stops with a `limit` error (a computed
/// property then reads `null`; a binding's write is refused as `too_large`).
///
/// Owned by the evaluation that created it (a `KeyPathEvaluator` evaluating one computed property that a
/// key path reads, with everything that property reads; or one binding expression); the caller's thread.
/// Sibling computed properties a key path reads (`items.total` over many objects) each get their own.
final class ExpressionBudget {
    /// Steps one evaluation may take.
    static let maximumSteps = 200_000
    /// Bytes of string a step covers when they are only copied (`+`).
    static let copiedBytesPerStep = 256
    /// Bytes of string a step covers when they are read character by character (functions, comparisons).
    static let scannedBytesPerStep = 16
    /// Bytes of string a step covers when `contains` searches them.
    static let searchedBytesPerStep = 2

    /// Steps taken so far.
    private(set) var spent = 0
    /// Steps this evaluation may take: `maximumSteps`, or less for an evaluation that runs on many
    /// writes for one client (a live query's filter).
    let limit: Int

    init(limit: Int = ExpressionBudget.maximumSteps) {
        self.limit = limit
    }

    /// Whether the steps ran out.
    var isExhausted: Bool { spent > limit }

    /// Takes `steps`; a `limit` error pointing at `column` when that exceeds the budget.
    func spend(_ steps: Int, column: Int) throws(ExpressionError) {
        spent += steps
        if spent > limit {
            throw .limit("the evaluation exceeded its work limit of \(limit) steps", at: column)
        }
    }

    /// Takes the steps for `byteCount` bytes of string at `bytesPerStep` (and one for the operation).
    func spend(bytes byteCount: Int, per bytesPerStep: Int, column: Int) throws(ExpressionError) {
        try spend(1 + byteCount / bytesPerStep, column: column)
    }

    /// Takes `steps` without failing (a memoized computed value's cost); the next `spend` fails if the
    /// budget is now exhausted.
    func charge(_ steps: Int) {
        spent += steps
    }
}
