import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// The built `kvoclient` against a real `kvod`: every command's output, value parsing, array
/// commands, subscribe (options, --json, --count, several key paths, array kinds, sourceDeleted,
/// server shutdown with and without reconnecting, Ctrl-C, a closed stdout), error lines and exit
/// codes. Resuming across a kvod restart is in DurabilityTests.
@Suite("kvoclient")
struct CLITests {
    // MARK: - Commands

    @Test("create, get, set, delete, list and ping print scriptable output")
    func commandsPrintScriptableOutput() throws {
        let server = try KVODProcess()
        let create = try KVOClientProcess.run(server, ["create", "person", #"{"name":"Ada","address":{"city":"London"}}"#])
        expectSuccess(create, lines: ["rev 1"])
        expectSuccess(try KVOClientProcess.run(server, ["get", "person"]), lines: [#"{"address":{"city":"London"},"name":"Ada"}"#])
        expectSuccess(try KVOClientProcess.run(server, ["get", "person", "address.city"]), lines: [#""London""#])
        expectSuccess(try KVOClientProcess.run(server, ["get", "person", "age"]), lines: ["null"])
        expectSuccess(try KVOClientProcess.run(server, ["set", "person", "address.city", "Paris"]), lines: ["rev 2"])
        expectSuccess(try KVOClientProcess.run(server, ["get", "person", "address"]), lines: [#"{"city":"Paris"}"#])
        expectSuccess(try KVOClientProcess.run(server, ["create", "clock"]), lines: ["rev 3"])
        expectSuccess(try KVOClientProcess.run(server, ["get", "clock"]), lines: ["{}"])
        expectSuccess(try KVOClientProcess.run(server, ["list"]), lines: ["clock", "person"])
        expectSuccess(try KVOClientProcess.run(server, ["delete", "clock"]), lines: ["rev 4"])
        expectSuccess(try KVOClientProcess.run(server, ["list"]), lines: ["person"])
        expectSuccess(try KVOClientProcess.run(server, ["ping"]), lines: ["pong"])
    }

    @Test("--host and --port work before and after the subcommand")
    func connectionOptionsInEitherPlace() throws {
        let server = try KVODProcess()
        let after = try KVOClientProcess.run(["ping", "--host", "127.0.0.1", "--port", String(server.port)])
        expectSuccess(after, lines: ["pong"])
        let before = try KVOClientProcess.run(["--host", "127.0.0.1", "--port", String(server.port), "ping"])
        expectSuccess(before, lines: ["pong"])
    }

    @Test("a value argument is JSON when it parses, a plain string when it does not look like JSON")
    func valueArgumentsAreJSONOrPlainStrings() throws {
        let server = try KVODProcess()
        let connection = try server.connect()
        try connection.call("create", ["object": "v"])
        let cases: [(argument: String, stored: JSONValue)] = [
            ("2026-11-21", "2026-11-21"),
            (#""2026-11-21""#, "2026-11-21"),
            ("42", 42),
            (#""42""#, "42"),
            ("-1.5", -1.5),
            ("-7", -7),
            ("-x", "-x"),
            ("true", true),
            ("null", .null),
            (#"{"a":[1,"two"]}"#, ["a": [1, "two"]]),
            ("hello world", "hello world"),
            (#""[1,""#, "[1,"),
            ("", ""),
            ("Zürich", "Zürich"),
        ]
        for (argument, stored) in cases {
            let result = try KVOClientProcess.run(server, ["set", "v", "k", argument])
            expectEqual(result.status, 0, "set \(argument): \(result.stderr)")
            let reply = try connection.call("get", ["object": "v", "keyPath": "k"])
            expectEqual(reply["value"], stored, "argument \(argument)")
            expectEqual(reply["value"]?.typeName, stored.typeName, "argument \(argument)")
            let printed = try KVOClientProcess.run(server, ["get", "v", "k"])
            expectSuccess(printed, lines: [stored.description])
        }
    }

    @Test("`--` before a value that looks like an option")
    func terminatorBeforeValue() throws {
        let server = try KVODProcess()
        let connection = try server.connect()
        try connection.call("create", ["object": "v"])
        expectSuccess(try KVOClientProcess.run(server, ["set", "v", "k", "--", "-3"]), lines: ["rev 2"])
        expectEqual(try connection.call("get", ["object": "v", "keyPath": "k"])["value"], -3)
        expectSuccess(try KVOClientProcess.run(server, ["set", "v", "k", "--", "--port"]), lines: ["rev 3"])
        expectEqual(try connection.call("get", ["object": "v", "keyPath": "k"])["value"], "--port")
    }

    @Test("increment prints the new value then rev N; a negative step works; a non-number step is a usage error; a string value is type_mismatch")
    func increment() throws {
        let server = try KVODProcess()
        expectSuccess(try KVOClientProcess.run(server, ["create", "stats", #"{"visits":40,"name":"x"}"#]), lines: ["rev 1"])
        expectSuccess(try KVOClientProcess.run(server, ["increment", "stats", "visits"]), lines: ["41", "rev 2"])
        expectSuccess(try KVOClientProcess.run(server, ["increment", "stats", "visits", "-51"]), lines: ["-10", "rev 3"])
        expectSuccess(try KVOClientProcess.run(server, ["increment", "stats", "ratio", "0.25"]), lines: ["0.25", "rev 4"])
        let usage = try KVOClientProcess.run(server, ["increment", "stats", "visits", "two"])
        expectEqual(usage.status, 2, "\(usage.stderr)")
        #expect(usage.stdout.isEmpty)
        let refused = try KVOClientProcess.run(server, ["increment", "stats", "name"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("type_mismatch"), "\(refused.stderr)")
        expectSuccess(try KVOClientProcess.run(server, ["get", "stats", "visits"]), lines: ["-10"])
    }

    @Test("create takes a JSON object or nothing; anything else is a usage error (exit 2)")
    func createRejectsNonObjectValues() throws {
        let server = try KVODProcess()
        for values in ["[1]", "42", "not json"] {
            let result = try KVOClientProcess.run(server, ["create", "x", values])
            expectEqual(result.status, 2, "values \(values)")
            expectEqual(result.errorLines.first?.hasPrefix("kvoclient: error: values must be a JSON object"), true, "\(result.stderr)")
            #expect(result.stdout.isEmpty)
        }
        let list = try KVOClientProcess.run(server, ["list"])
        expectSuccess(list, lines: [])
    }

    @Test("info prints one line per observer, sorted by sub")
    func infoPrintsOneLinePerObserver() throws {
        let server = try KVODProcess()
        let observer = try server.connect()
        let connectionID = try #require(try observer.call("hello", ["client": "CLITests"])["connection"]?.intValue)
        try observer.call("create", ["object": "clock", "values": ["date": "2026-11-20", "zone": ["name": "UTC"]]])
        expectSuccess(try KVOClientProcess.run(server, ["info", "clock"]), lines: [])
        let first = try #require(try observer.call("observe", [
            "object": "clock", "keyPath": "date", "options": ["new", "old"],
        ])["sub"]?.intValue)
        let second = try #require(try observer.call("observe", [
            "object": "clock", "keyPath": "zone.name", "options": [],
        ])["sub"]?.intValue)
        let info = try KVOClientProcess.run(server, ["info", "clock"])
        expectSuccess(info, lines: [
            "sub=\(first)  keyPath=date  options=new,old  connection=\(connectionID)",
            "sub=\(second)  keyPath=zone.name  options=-  connection=\(connectionID)",
        ])
    }

    @Test("insert, remove and replace change arrays; subscribe names the kind and the indexes")
    func arrayCommands() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "todo", "values": ["items": ["bread"]]])
        let subscriber = try KVOClientProcess.start(server, [
            "subscribe", "todo", "items", "--options", "old,new", "--count", "4",
        ])
        try waitForObservers(writer, object: "todo", count: 1)
        expectSuccess(try KVOClientProcess.run(server, ["insert", "todo", "items", "milk", "eggs"]), lines: ["rev 2"])
        expectEqual(subscriber.nextLine(), #"todo.items  valueChanged  rev=2  kind=insertion  indexes=[1,2]  new=["milk","eggs"]"#)
        expectSuccess(try KVOClientProcess.run(server, ["insert", "todo", "items", "--index", "0", "--", "-1"]), lines: ["rev 3"])
        expectEqual(subscriber.nextLine(), #"todo.items  valueChanged  rev=3  kind=insertion  indexes=[0]  new=[-1]"#)
        expectSuccess(try KVOClientProcess.run(server, ["remove", "todo", "items", "0", "2"]), lines: ["rev 4"])
        expectEqual(subscriber.nextLine(), #"todo.items  valueChanged  rev=4  kind=removal  indexes=[0,2]  old=[-1,"milk"]"#)
        expectSuccess(
            try KVOClientProcess.run(server, ["replace", "todo", "items", "1", #"{"name":"eggs","n":12}"#]), lines: ["rev 5"])
        expectEqual(subscriber.nextLine(), #"todo.items  valueChanged  rev=5  kind=replacement  indexes=[1]  old=["eggs"]  new=[{"n":12,"name":"eggs"}]"#)
        let result = subscriber.finish()
        expectEqual(result.status, 0)
        #expect(result.stderr.isEmpty)

        expectSuccess(try KVOClientProcess.run(server, ["insert", "todo", "items", "x", "y", "--indexes", "0,3"]), lines: ["rev 6"])
        expectSuccess(try KVOClientProcess.run(server, ["replace", "todo", "items", "0", "X", "3", "-2.5"]), lines: ["rev 7"])
        let items = try writer.call("get", ["object": "todo", "keyPath": "items"])["value"]
        expectEqual(items, ["X", "bread", ["name": "eggs", "n": 12], -2.5])

        let outOfRange = try KVOClientProcess.run(server, ["remove", "todo", "items", "9"])
        expectEqual(outOfRange.status, 1)
        expectEqual(outOfRange.errorLines.count, 1)
        #expect(outOfRange.stderr.hasPrefix("kvoclient: error: out_of_range: "), "\(outOfRange.stderr)")
    }

    @Test("subscribe through a reference shows pathChanged when the reference is re-pointed")
    func subscribeThroughReference() throws {
        let server = try KVODProcess()
        expectSuccess(try KVOClientProcess.run(server, ["create", "oslo", #"{"city":"Oslo"}"#]), lines: ["rev 1"])
        expectSuccess(try KVOClientProcess.run(server, ["create", "bergen", #"{"city":"Bergen"}"#]), lines: ["rev 2"])
        expectSuccess(try KVOClientProcess.run(server, ["create", "person", #"{"address":{"$ref":"oslo"}}"#]), lines: ["rev 3"])
        let subscriber = try KVOClientProcess.start(server, [
            "subscribe", "person", "address.city", "--options", "initial,old,new", "--count", "3",
        ])
        expectEqual(subscriber.nextLine(), #"person.address.city  initial  rev=3  new="Oslo""#)
        expectSuccess(try KVOClientProcess.run(server, ["set", "person", "address", #"{"$ref":"bergen"}"#]), lines: ["rev 4"])
        expectEqual(subscriber.nextLine(), #"person.address.city  pathChanged  rev=4  old="Oslo"  new="Bergen""#)
        expectSuccess(try KVOClientProcess.run(server, ["set", "person", "address.city", "Trondheim"]), lines: ["rev 5"])
        expectEqual(subscriber.nextLine(), #"person.address.city  valueChanged  rev=5  old="Bergen"  new="Trondheim""#)
        expectEqual(subscriber.finish().status, 0)
        expectSuccess(try KVOClientProcess.run(server, ["get", "bergen", "city"]), lines: [#""Trondheim""#])
    }

    // MARK: - Errors

    @Test("a server error is one stderr line and exit 1", arguments: [
        (["get", "missing"], "not_found"),
        (["info", "missing"], "not_found"),
        (["delete", "missing"], "not_found"),
        (["set", "missing", "a", "1"], "not_found"),
        (["create", "person"], "exists"),
        (["get", "person", "name.first"], "type_mismatch"),
        (["set", "person", "nested.deeper", "1"], "not_found"),
        (["subscribe", "missing", "date"], "not_found"),
        (["insert", "person", "name", "x"], "type_mismatch"),
        (["remove", "person", "name", "0"], "type_mismatch"),
    ])
    func serverErrorsAreOneLineAndExitOne(arguments: [String], code: String) throws {
        let server = try KVODProcess()
        try server.connect().call("create", ["object": "person", "values": ["name": "Ada"]])
        let result = try KVOClientProcess.run(server, arguments)
        expectEqual(result.status, 1)
        #expect(result.exitedNormally)
        #expect(result.stdout.isEmpty)
        expectEqual(result.errorLines.count, 1, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("kvoclient: error: \(code): "), "\(result.stderr)")
    }

    @Test("--if-equals, --if-exists and --if-absent: a write that holds prints rev N; one that does not is conflict, exit 1, with what is there now")
    func conditionalWrites() throws {
        let server = try KVODProcess()
        expectSuccess(try KVOClientProcess.run(server, ["create", "acct", #"{"balance":100}"#, "--if-absent"]), lines: ["rev 1"])
        expectSuccess(try KVOClientProcess.run(server, ["set", "acct", "balance", "90", "--if-equals", "100"]), lines: ["rev 2"])
        let refused = try KVOClientProcess.run(server, ["set", "acct", "balance", "80", "--if-equals", "100"])
        #expect(refused.status == 1 && refused.stdout.isEmpty)
        #expect(refused.stderr.hasPrefix("kvoclient: error: conflict: ") && refused.stderr.contains("(now: 90)"), "\(refused.stderr)")
        let again = try KVOClientProcess.run(server, ["create", "acct", "--if-absent"])
        #expect(again.status == 1 && again.stderr.contains("(the object exists)"), "\(again.stderr)")
        expectSuccess(try KVOClientProcess.run(server, ["increment", "acct", "balance", "5", "--if-equals", "90"]), lines: ["95", "rev 3"])
        let stale = try KVOClientProcess.run(server, ["set", "acct", "balance", "1", "--if-rev", "2"])
        #expect(stale.status == 1 && stale.stderr.contains("conflict: ifRev does not hold"), "\(stale.stderr)")
        expectSuccess(try KVOClientProcess.run(server, ["delete", "acct", "--if-exists", "--if-rev", "3"]), lines: ["rev 4"])
        let gone = try KVOClientProcess.run(server, ["delete", "acct", "--if-exists"])
        #expect(gone.status == 1 && gone.stderr.contains("conflict") && gone.stderr.contains("(the object does not exist)"), "\(gone.stderr)")
        // Usage errors, before connecting.
        for arguments in [["create", "x", "--if-equals", "1"], ["delete", "x", "--if-exists", "--if-absent"]] {
            expectEqual(try KVOClientProcess.run(server, arguments).status, 2, "\(arguments)")
        }
    }

    @Test("batch FILE applies the file's writes with one revision; a refused part exits 1 naming it; a bad file exits 2")
    func batchFromAFile() throws {
        let server = try KVODProcess()
        let scratch = try TemporaryDirectory("cli-batch")
        let file = scratch.appending("transfer.json")
        try #"""
            [{"op":"create","object":"a","values":{"balance":100}},
             {"op":"create","object":"b","values":{"balance":0}},
             {"op":"increment","object":"a","keyPath":"balance","by":-30},
             {"op":"increment","object":"b","keyPath":"balance","by":30}]
            """#.write(toFile: file, atomically: true, encoding: .utf8)
        expectSuccess(try KVOClientProcess.run(server, ["batch", file]),
                      lines: ["part 2 value 70", "part 3 value 30", "rev 1"])
        let conflict = scratch.appending("conflict.json")
        try #"[{"op":"set","object":"a","keyPath":"balance","value":0},{"op":"delete","object":"b","ifAbsent":true}]"#
            .write(toFile: conflict, atomically: true, encoding: .utf8)
        let refused = try KVOClientProcess.run(server, ["batch", conflict])
        #expect(refused.status == 1 && refused.stdout.isEmpty)
        #expect(refused.stderr.hasPrefix("kvoclient: error: conflict: part 1 (delete): "), "\(refused.stderr)")
        expectSuccess(try KVOClientProcess.run(server, ["get", "a", "balance"]), lines: ["70"])
        let notArray = scratch.appending("object.json")
        try #"{"op":"set"}"#.write(toFile: notArray, atomically: true, encoding: .utf8)
        for arguments in [["batch", notArray], ["batch", scratch.appending("missing.json")]] {
            let result = try KVOClientProcess.run(server, arguments)
            #expect(result.status == 2 && result.stderr.contains("batch"), "\(arguments): \(result.stderr)")
        }
    }

    @Test("a refused connection names host and port and exits 3")
    func refusedConnectionNamesHostAndPort() throws {
        let server = try KVODProcess()
        let port = server.port
        server.stop(signal: SIGKILL)
        for command in [["ping"], ["get", "x"], ["subscribe", "x", "y"]] {
            let result = try KVOClientProcess.run(["--port", String(port)] + command)
            expectEqual(result.status, 3)
            #expect(result.stdout.isEmpty)
            expectEqual(result.stderr, "kvoclient: error: cannot connect to 127.0.0.1:\(port): Connection refused\n")
        }
    }

    @Test("usage errors exit 2 with a kvoclient: error: line", arguments: [
        ["subscribe", "clock", "date", "--options", "initial,bogus"],
        ["subscribe", "clock", "date", "--count", "0"],
        ["subscribe", "clock"],
        ["set", "clock", "date"],
        ["set", "clock", "date", "two", "words"],
        ["insert", "todo", "items"],
        ["insert", "todo", "items", "a", "--index", "1", "--indexes", "2"],
        ["insert", "todo", "items", "a", "--indexes", "1,x"],
        ["remove", "todo", "items"],
        ["remove", "todo", "items", "first"],
        ["replace", "todo", "items", "0"],
        ["replace", "todo", "items", "first", "x"],
        ["frobnicate"],
        ["--port", "0", "ping"],
        ["--port", "70000", "ping"],
    ])
    func usageErrorsExitTwo(arguments: [String]) throws {
        let result = try KVOClientProcess.run(arguments)
        expectEqual(result.status, 2)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.hasPrefix("kvoclient: error: "), "\(result.stderr)")
    }

    // MARK: - subscribe

    @Test("subscribe --options initial,new,old prints initial and change lines, skips no-op sets, stops after --count")
    func subscribeInitialNewOld() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "clock", "values": ["date": "2026-11-20"]])
        let subscriber = try KVOClientProcess.start(server, [
            "subscribe", "clock", "date", "--options", "initial,new,old", "--count", "3",
        ])
        expectEqual(subscriber.nextLine(), #"clock.date  initial  rev=1  new="2026-11-20""#)
        expectSuccess(try KVOClientProcess.run(server, ["set", "clock", "date", "2026-11-21"]), lines: ["rev 2"])
        expectEqual(subscriber.nextLine(), #"clock.date  valueChanged  rev=2  old="2026-11-20"  new="2026-11-21""#)
        // Setting the same value advances rev but notifies nobody.
        expectSuccess(try KVOClientProcess.run(server, ["set", "clock", "date", #""2026-11-21""#]), lines: ["rev 3"])
        try writer.call("set", ["object": "clock", "keyPath": "date", "value": ["day": 22]])
        expectEqual(subscriber.nextLine(), #"clock.date  valueChanged  rev=4  old="2026-11-21"  new={"day":22}"#)
        let result = subscriber.finish()
        expectEqual(result.status, 0)
        #expect(result.exitedNormally)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.isEmpty)
    }

    @Test("subscribe --options prior marks the prior notification before the change")
    func subscribePrior() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "clock", "values": ["date": "2026-11-20"]])
        let subscriber = try KVOClientProcess.start(server, [
            "subscribe", "clock", "date", "--options", "prior,old,new", "--count", "2",
        ])
        try waitForObservers(writer, object: "clock", count: 1)
        try writer.call("set", ["object": "clock", "keyPath": "date", "value": "2026-11-21"])
        expectEqual(subscriber.nextLine(), #"clock.date  valueChanged  prior  rev=2  old="2026-11-20""#)
        expectEqual(subscriber.nextLine(), #"clock.date  valueChanged  rev=2  old="2026-11-20"  new="2026-11-21""#)
        let result = subscriber.finish()
        expectEqual(result.status, 0)
        #expect(result.stderr.isEmpty)
    }

    @Test("subscribe defaults to the new option only")
    func subscribeDefaultsToNew() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "clock", "values": ["date": "2026-11-20"]])
        let subscriber = try KVOClientProcess.start(server, ["subscribe", "clock", "date", "--count", "1"])
        let observers = try waitForObservers(writer, object: "clock", count: 1)
        expectEqual(observers.first?["options"], ["new"])
        try writer.call("set", ["object": "clock", "keyPath": "date", "value": "2026-11-21"])
        expectEqual(subscriber.nextLine(), #"clock.date  valueChanged  rev=2  new="2026-11-21""#)
        expectEqual(subscriber.finish().status, 0)
    }

    @Test("subscribe --json prints each event as one JSON line")
    func subscribeJSON() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "clock", "values": ["date": "2026-11-20"]])
        let subscriber = try KVOClientProcess.start(server, [
            "subscribe", "clock", "date", "--options", "initial,new", "--json", "--count", "2",
        ])
        let initialLine = try #require(subscriber.nextLine())
        let initial = try JSONParser.parse(initialLine)
        let observers = try waitForObservers(writer, object: "clock", count: 1)
        let sub = try #require(observers.first?["sub"])
        #expect(initial == [
            "event": "change", "sub": sub, "object": "clock", "keyPath": "date", "reason": "initial", "rev": 1,
            "change": ["kind": 1, "new": "2026-11-20"],
        ])
        try writer.call("set", ["object": "clock", "keyPath": "date", "value": "2026-11-21"])
        let changed = try JSONParser.parse(try #require(subscriber.nextLine()))
        #expect(changed == [
            "event": "change", "sub": sub, "object": "clock", "keyPath": "date", "reason": "valueChanged", "rev": 2,
            "change": ["kind": 1, "new": "2026-11-21"],
        ])
        let result = subscriber.finish()
        expectEqual(result.status, 0)
        #expect(result.stdout.isEmpty)
    }

    @Test("subscribe to several key paths; exits 0 once every subscription ended with sourceDeleted")
    func subscribeSeveralKeyPathsUntilDeleted() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "person", "values": ["name": "Ada", "address": ["city": "London"]]])
        let subscriber = try KVOClientProcess.start(server, [
            "subscribe", "person", "name", "address.city", "--options", "old,new",
        ])
        try waitForObservers(writer, object: "person", count: 2)
        try writer.call("set", ["object": "person", "keyPath": "name", "value": "Bea"])
        expectEqual(subscriber.nextLine(), #"person.name  valueChanged  rev=2  old="Ada"  new="Bea""#)
        try writer.call("set", ["object": "person", "keyPath": "address", "value": ["city": "Paris"]])
        expectEqual(subscriber.nextLine(), #"person.address.city  valueChanged  rev=3  old="London"  new="Paris""#)
        try writer.call("delete", ["object": "person"])
        let finalLines: Set<String?> = [subscriber.nextLine(), subscriber.nextLine()]
        #expect(finalLines == [
            #"person.name  sourceDeleted  rev=4  old="Bea"  new=null"#,
            #"person.address.city  sourceDeleted  rev=4  old="Paris"  new=null"#,
        ])
        let result = subscriber.finish()
        expectEqual(result.status, 0)
        #expect(result.exitedNormally)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.isEmpty)
    }

    @Test("subscribe --no-reconnect exits 3 with a clear message when the server goes away")
    func subscribeReportsServerShutdown() throws {
        let server = try KVODProcess()
        try server.connect().call("create", ["object": "clock", "values": ["date": "2026-11-20"]])
        let subscriber = try KVOClientProcess.start(server, [
            "subscribe", "clock", "date", "--options", "initial", "--no-reconnect",
        ])
        expectEqual(subscriber.nextLine(), "clock.date  initial  rev=1")
        server.stop()
        let result = subscriber.finish()
        expectEqual(result.status, 3)
        expectEqual(result.stderr, "kvoclient: error: the server at 127.0.0.1:\(server.port) closed the connection (1 subscription still active)\n")
    }

    @Test("subscribe says on stderr that it lost the connection, keeps trying, and Ctrl-C then exits 0")
    func subscribeRetriesUntilInterrupted() throws {
        let server = try KVODProcess()
        try server.connect().call("create", ["object": "clock", "values": ["date": "2026-11-20"]])
        let subscriber = try KVOClientProcess.start(server, ["subscribe", "clock", "date", "--options", "initial"])
        expectEqual(subscriber.nextLine(), "clock.date  initial  rev=1")
        server.stop()
        #expect(subscriber.nextErrorLine()
            == "kvoclient: lost the connection to 127.0.0.1:\(server.port) (the server closed the connection); reconnecting")
        // Nothing listens now; the subscriber keeps trying with backoff until it is interrupted.
        #expect(subscriber.process.isRunning)
        subscriber.send(signal: SIGINT)
        let result = subscriber.finish(timeout: 5)
        #expect(result.exitedNormally)
        expectEqual(result.status, 0)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.isEmpty)
    }

    @Test("subscribe exits 1 when the kvod it reconnects to no longer has the object")
    func subscribeEndsWhenObjectIsGoneAfterReconnecting() throws {
        let server = try KVODProcess()
        try server.connect().call("create", ["object": "clock", "values": ["date": "2026-11-20"]])
        let subscriber = try KVOClientProcess.start(server, ["subscribe", "clock", "date", "--options", "initial"])
        expectEqual(subscriber.nextLine(), "clock.date  initial  rev=1")
        // An --in-memory kvod restarts empty: the object and its history are gone.
        let empty = try server.restart(after: SIGTERM)
        let result = subscriber.finish()
        expectEqual(result.status, 1)
        #expect(result.stdout.isEmpty)
        #expect(result.errorLines == [
            "kvoclient: lost the connection to 127.0.0.1:\(empty.port) (the server closed the connection); reconnecting",
            "kvoclient: error: not_found: object 'clock' does not exist",
        ])
    }

    @Test("Ctrl-C (SIGINT) ends subscribe cleanly, and the server drops its subscriptions")
    func subscribeExitsCleanlyOnSIGINT() throws {
        let server = try KVODProcess()
        let watcher = try server.connect()
        try watcher.call("create", ["object": "clock", "values": ["date": "2026-11-20"]])
        let subscriber = try KVOClientProcess.start(server, [
            "subscribe", "clock", "date", "--options", "initial,new",
        ])
        expectEqual(subscriber.nextLine(), #"clock.date  initial  rev=1  new="2026-11-20""#)
        subscriber.send(signal: SIGINT)
        let result = subscriber.finish(timeout: 5)
        #expect(result.exitedNormally)
        expectEqual(result.status, 0)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.isEmpty)
        try waitForObservers(watcher, object: "clock", count: 0)
    }

    @Test("subscribe ends when its reader closes the pipe, even if started with SIGPIPE ignored")
    func subscribeEndsWhenStdoutCloses() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "clock", "values": ["date": "2026-11-20"]])
        let subscriber = try KVOClientProcess.start(
            server, ["subscribe", "clock", "date", "--options", "initial,new"], ignoringSIGPIPE: true)
        expectEqual(subscriber.nextLine(), #"clock.date  initial  rev=1  new="2026-11-20""#)
        subscriber.closeStdout()
        try writer.call("set", ["object": "clock", "keyPath": "date", "value": "2026-11-21"])
        let result = subscriber.finish(timeout: 5)
        #expect(!result.exitedNormally)
        expectEqual(result.status, SIGPIPE, "stderr: \(result.stderr)")
        try waitForObservers(writer, object: "clock", count: 0)
    }
}
