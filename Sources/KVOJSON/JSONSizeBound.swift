/// Upper bounds on the size of JSON text before it is written, with an early stop: to refuse a reply
/// that would be too large without encoding it to find out.
///
/// `JSONWriter` writes at most the bytes counted here: strings count their escapes (a control character
/// as six bytes, `"` and `\` as two), integers their digits, and a double 24 bytes (the longest
/// `Double.description`), so the bound is exact except for doubles and control characters. The walk
/// stops as soon as the count passes the limit: every step counts at least one byte, so the work is
/// bounded by the limit, not by the size of the value (a 400 MB string is refused in one step).
///
/// Pure functions: any thread.
public enum JSONSizeBound {
    /// The most bytes `JSONWriter.write(value)` appends, or nil when that passes `limit`.
    public static func of(_ value: JSONValue, limit: Int) -> Int? {
        var total = 0
        return add(value, to: &total, limit: limit) ? total : nil
    }

    /// The most bytes `JSONWriter.writeString(text)` appends (quotes included), or nil when that
    /// passes `limit`.
    public static func ofString(_ text: String, limit: Int) -> Int? {
        var total = 0
        return addString(text, to: &total, limit: limit) ? total : nil
    }

    /// Adds the bound for `value` to `total`; false (with `total` somewhere past `limit`) once it
    /// passes `limit`.
    public static func add(_ value: JSONValue, to total: inout Int, limit: Int) -> Bool {
        switch value {
        case .null: total += 4
        case let .bool(flag): total += flag ? 4 : 5
        case let .int(integer): total += digitCount(integer)
        case .double: total += 24
        case let .string(text): return addString(text, to: &total, limit: limit)
        case let .array(elements):
            total += 1 + max(elements.count, 1)  // brackets and commas
            guard total <= limit else { return false }
            for element in elements where !add(element, to: &total, limit: limit) { return false }
        case let .object(members):
            total += 1 + max(members.count, 1) + members.count  // braces, commas, colons
            guard total <= limit else { return false }
            for (key, member) in members {
                guard addString(key, to: &total, limit: limit), add(member, to: &total, limit: limit) else { return false }
            }
        }
        return total <= limit
    }

    /// Adds the bound for the quoted string `text` to `total`; false once it passes `limit`.
    public static func addString(_ text: String, to total: inout Int, limit: Int) -> Bool {
        // The bytes alone decide a huge string at once; only a string that may fit has its escapes counted.
        guard total + text.utf8.count + 2 <= limit else {
            total += text.utf8.count + 2
            return false
        }
        total += JSONWriter.encodedLength(ofString: text)
        return total <= limit
    }

    /// Characters in the decimal form of `value`, sign included.
    public static func digitCount(_ value: Int64) -> Int {
        var magnitude = value.magnitude
        var count = value < 0 ? 2 : 1
        while magnitude >= 10 {
            magnitude /= 10
            count += 1
        }
        return count
    }
}
