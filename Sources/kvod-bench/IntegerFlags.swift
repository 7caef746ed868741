/// The `--name N` options of kvod-bench's commands: every argument a flag followed by an integer.
/// Main thread.
enum IntegerFlags {
    /// The flags in `arguments` by name (without `--`); anything else fails the run with `usage`.
    static func parse(_ arguments: [String], usage: String) -> [String: Int] {
        var options: [String: Int] = [:]
        var rest = arguments[...]
        while let flag = rest.first, let value = rest.dropFirst().first.flatMap({ Int($0) }), flag.hasPrefix("--") {
            options[String(flag.dropFirst(2))] = value
            rest = rest.dropFirst(2)
        }
        guard rest.isEmpty else { fail("usage: \(usage)") }
        return options
    }
}
