import ArgumentParser
import KVOClient
import KVOJSON

/// `--if-exists`, `--if-absent`, `--if-rev N` and `--if-equals VALUE`: the conditions a write carries (docs/protocol.md,
/// "Conditional writes"). A condition that does not hold is the server's `conflict`: exit 1, nothing written.
struct ConditionOptions: ParsableArguments {
    @Flag(help: "Write only if the object exists (else `conflict`).")
    var ifExists = false

    @Flag(help: "Write only if the object does not exist (else `conflict`).")
    var ifAbsent = false

    @Option(help: ArgumentHelp(
        "Write only if the object exists and has not changed after this revision (a `rev` read before); else `conflict`.",
        valueName: "rev"))
    var ifRev: Int64?

    @Option(help: ArgumentHelp(
        "Write only if the value at the command's key path is this one now (JSON, or a plain string); else `conflict`, which prints the value there now.",
        valueName: "value"))
    var ifEquals: String?

    /// Checks what can be checked before connecting: one of the existence flags, and a value only where
    /// the command has a key path.
    func validate(keyPath: String?) throws {
        if ifExists && ifAbsent { throw ValidationError("--if-exists and --if-absent cannot both hold") }
        if let ifRev, ifRev < 0 { throw ValidationError("--if-rev must be a revision (0 or more)") }
        if let ifEquals {
            guard keyPath != nil else { throw ValidationError("--if-equals needs a command with a key path") }
            _ = try ValueArgument.parse(ifEquals)
        }
    }

    /// The conditions for a write whose key path is `keyPath` (`--if-equals` compares the value there).
    func conditions(keyPath: String?) throws -> [WriteCondition] {
        var conditions: [WriteCondition] = []
        if ifExists { conditions.append(.exists) }
        if ifAbsent { conditions.append(.absent) }
        if let ifRev { conditions.append(.unchangedSince(ifRev)) }
        if let ifEquals, let keyPath { conditions.append(try .equals(keyPath, try ValueArgument.parse(ifEquals))) }
        return conditions
    }
}
