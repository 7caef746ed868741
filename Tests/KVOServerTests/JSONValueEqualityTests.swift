import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

@Suite("JSONValue equality")
struct JSONValueEqualityTests {
    @Test("integers and doubles compare by value")
    func numericEquality() {
        expectEqual(JSONValue.int(3), .double(3.0))
        expectEqual(JSONValue.double(3.0), .int(3))
        expectEqual(JSONValue.int(0), .double(-0.0))
        expectEqual(JSONValue.int(-7), .double(-7.0))
        #expect(JSONValue.int(3) != .double(3.5))
        #expect(JSONValue.double(3.5) != .int(3))
        #expect(JSONValue.int(3) != .int(4))
        expectEqual(JSONValue.double(0.1), .double(0.1))
        // 2^63 as a double is not Int64.max (it is out of Int64's range).
        #expect(JSONValue.int(.max) != .double(9_223_372_036_854_775_808.0))
        expectEqual(JSONValue.int(.min), .double(-9_223_372_036_854_775_808.0))
        // 2^53 + 1 is not representable as a double: the nearest double is 2^53.
        #expect(JSONValue.int(9_007_199_254_740_993) != .double(9_007_199_254_740_992.0))
        expectEqual(JSONValue.int(9_007_199_254_740_992), .double(9_007_199_254_740_992.0))
    }

    @Test("numeric equality holds inside arrays and objects")
    func nestedNumericEquality() throws {
        expectEqual(JSONValue.array([.int(1), .double(2)]), .array([.double(1.0), .int(2)]))
        expectEqual(JSONValue.object(["a": .int(1)]), .object(["a": .double(1.0)]))
        #expect(try JSONParser.parse(#"{"a":[1,2]}"#) == JSONParser.parse(#"{"a":[1.0,2e0]}"#))
        #expect(try JSONParser.parse(#"{"a":[1,2]}"#) != JSONParser.parse(#"{"a":[1.0,2.5]}"#))
    }

    @Test("different types are never equal")
    func typesDiffer() {
        #expect(JSONValue.string("1") != .int(1))
        #expect(JSONValue.null != .bool(false))
        #expect(JSONValue.bool(true) != .int(1))
        #expect(JSONValue.array([]) != .object([:]))
        #expect(JSONValue.null != .string("null"))
        #expect(JSONValue.array([.int(1)]) != .array([.int(1), .int(1)]))
        #expect(JSONValue.object(["a": .null]) != .object([:]))
    }
}
