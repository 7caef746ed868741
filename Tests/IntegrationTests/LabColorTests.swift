import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// The LabColor example end to end with the built `kvoclient`: `define-class` from
/// examples/LabColor.json, `create --class`, `subscribe c1 color`, sets of the L, a and b components,
/// the printed events and `get`, all compared with the example's formulas computed here in Swift (CIE
/// L*a*b* to XYZ, then each component clamped, scaled to 0…255 and rounded half away from zero).
@Suite struct LabColorTests {
    /// examples/LabColor.json, found from this file's place in the repository.
    static var examplePath: String {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("examples/LabColor.json").path
    }

    /// The example's `f` (the inverse of CIE's companding function) for t.
    private static func f(_ t: Double) -> Double {
        t > 6.0 / 29.0 ? pow(t, 3) : 3 * pow(6.0 / 29.0, 2) * (t - 4.0 / 29.0)
    }

    /// red, green and blue components (the example's names for X, Y and Z) for L, a, b.
    static func components(l: Double, a: Double, b: Double) -> (red: Double, green: Double, blue: Double) {
        let fy = (l + 16) / 116
        return (95.047 * f(fy + a / 500), 100 * f(fy), 108.883 * f(fy - b / 200))
    }

    /// The example's `color` for L, a, b: `rgb(R, G, B)`.
    static func color(l: Double, a: Double, b: Double) -> String {
        let (red, green, blue) = components(l: l, a: a, b: b)
        func byte(_ value: Double) -> Int { Int((min(max(value * 0.01, 0), 1) * 255).rounded(.toNearestOrAwayFromZero)) }
        return "rgb(\(byte(red)), \(byte(green)), \(byte(blue)))"
    }


    @Test("the formulas computed here match a few known CIE values (the test's own arithmetic is right)")
    func formulasAreRight() {
        expectEqual(Self.color(l: 50, a: 0, b: 0), "rgb(45, 47, 51)")
        expectEqual(Self.color(l: 100, a: 0, b: 0), "rgb(242, 255, 255)")
        expectEqual(Self.color(l: 0, a: 0, b: 0), "rgb(0, 0, 0)")
        let white = Self.components(l: 100, a: 0, b: 0)
        #expect(abs(white.red - 95.047) < 1e-9 && abs(white.green - 100) < 1e-9 && abs(white.blue - 108.883) < 1e-9)
    }

    @Test("define-class, create --class, subscribe to color, set components: printed events and get match the formula")
    func labColorEndToEnd() throws {
        let server = try KVODProcess()
        let watcher = try server.connect()
        #expect(FileManager.default.fileExists(atPath: Self.examplePath), "\(Self.examplePath)")
        expectSuccess(try KVOClientProcess.run(server, ["define-class", Self.examplePath]), lines: ["defined LabColor"])
        expectSuccess(try KVOClientProcess.run(server, ["create", "c1", "--class", "LabColor"]), lines: ["rev 1"])
        expectSuccess(try KVOClientProcess.run(server, ["get", "c1"]),
                      lines: [#"{"$class":"LabColor","aComponent":0,"bComponent":0,"lComponent":50}"#])
        var (l, a, b): (Double, Double, Double) = (50, 0, 0)
        expectSuccess(try KVOClientProcess.run(server, ["get", "c1", "color"]), lines: ["\"\(Self.color(l: l, a: a, b: b))\""])

        // Each step: which component, its new value. Some leave the color as it is.
        let steps: [(String, Double)] = [
            ("lComponent", 75), ("aComponent", 40), ("bComponent", -30), ("lComponent", 75), ("aComponent", 40.01),
            ("lComponent", 0), ("lComponent", 5), ("bComponent", 127), ("lComponent", 100), ("aComponent", -128),
        ]
        // The lines `subscribe` should print, worked out in Swift first (its --count needs the number).
        var expectedLines = ["c1.color  initial  rev=1  new=\"\(Self.color(l: l, a: a, b: b))\""]
        var rev = 1
        var expectedRevs: [Int] = []
        do {
            var (ll, aa, bb) = (l, a, b)
            for (component, value) in steps {
                let old = Self.color(l: ll, a: aa, b: bb)
                switch component {
                case "lComponent": ll = value
                case "aComponent": aa = value
                default: bb = value
                }
                rev += 1
                expectedRevs.append(rev)
                let new = Self.color(l: ll, a: aa, b: bb)
                if new != old { expectedLines.append("c1.color  valueChanged  rev=\(rev)  old=\"\(old)\"  new=\"\(new)\"") }
            }
        }
        #expect(expectedLines.count < steps.count + 1, "some steps must leave the color equal, or the test proves less")
        let subscriber = try KVOClientProcess.start(server, [
            "subscribe", "c1", "color", "--options", "initial,old,new", "--count", String(expectedLines.count),
        ])
        expectEqual(subscriber.nextLine(), expectedLines[0])
        try waitForObservers(watcher, object: "c1", count: 1)
        for ((component, value), expectedRev) in zip(steps, expectedRevs) {
            let argument = value == value.rounded() ? String(Int(value)) : String(value)
            expectSuccess(try KVOClientProcess.run(server, ["set", "c1", component, "--", argument]), lines: ["rev \(expectedRev)"])
            switch component {
            case "lComponent": l = value
            case "aComponent": a = value
            default: b = value
            }
            expectSuccess(try KVOClientProcess.run(server, ["get", "c1", "color"]), lines: ["\"\(Self.color(l: l, a: a, b: b))\""])
        }
        // A value outside the class's range is refused and changes nothing.
        let refused = try KVOClientProcess.run(server, ["set", "c1", "lComponent", "120"])
        expectEqual(refused.status, 1)
        #expect(refused.errorLines.count == 1 && refused.errorLines.first?.hasPrefix("kvoclient: error: invalid_value: ") == true,
                "\(refused.stderr)")
        expectSuccess(try KVOClientProcess.run(server, ["get", "c1", "lComponent"]), lines: [String(Int(l))])
        let readOnly = try KVOClientProcess.run(server, ["set", "c1", "color", "red"])
        expectEqual(readOnly.status, 1)
        expectEqual(readOnly.errorLines.first?.hasPrefix("kvoclient: error: read_only: "), true, "\(readOnly.stderr)")

        let result = subscriber.finish()
        expectEqual(result.status, 0, "\(result.stderr)")
        // finish() returns what nextLine did not read: the remaining lines, in order.
        expectEqual(result.lines, Array(expectedLines.dropFirst()), "\(result.stdout)")

        // The components themselves, read over TCP, against the Swift formula.
        let client = try server.connect()
        let expected = Self.components(l: l, a: a, b: b)
        for (key, value) in [("redComponent", expected.red), ("greenComponent", expected.green), ("blueComponent", expected.blue)] {
            let served = try #require(try client.call("get", ["object": "c1", "keyPath": .string(key)])["value"]?.doubleValue, "\(key)")
            #expect(abs(served - value) < 1e-9, "\(key): \(served) vs \(value)")
        }
    }
}
