import KVOJSON

extension JSONValue {
    /// Whether this number is less than `other`, compared exactly (also an `Int64` beyond 2^53 against a
    /// double); false when either is not a number. For `min` and `max`.
    func isNumericallyLess(than other: JSONValue) -> Bool {
        switch (self, other) {
        case let (.int(a), .int(b)): return a < b
        case let (.double(a), .double(b)): return a < b
        case let (.int(a), .double(b)): return JSONValue.compare(a, b) < 0
        case let (.double(a), .int(b)): return JSONValue.compare(b, a) > 0
        default: return false
        }
    }

    /// The sign of `integer - double`, without rounding `integer` to a double. `double` is finite
    /// (JSON has no infinities or NaN).
    private static func compare(_ integer: Int64, _ double: Double) -> Int {
        // 2^63 is exactly representable; every Int64 is below it and at least -2^63.
        if double >= 9_223_372_036_854_775_808.0 { return -1 }
        if double < -9_223_372_036_854_775_808.0 { return 1 }
        let floor = double.rounded(.down)
        let floorInteger = Int64(floor)
        if integer < floorInteger { return -1 }
        if integer > floorInteger { return 1 }
        return floor == double ? 0 : -1
    }
}
