import KVOJSON

/// The class and binding definitions as they are stored and replicated (what `PersistedState` restores):
/// for the cluster's snapshot and state digest, which live outside the engine. Loop thread.
extension KVOEngine {
    /// Every class's canonical definition, by name.
    package func classDefinitionsByName() -> [String: JSONValue] {
        var definitions: [String: JSONValue] = [:]
        for compiled in classes.all { definitions[compiled.name] = compiled.definition.json }
        return definitions
    }

    /// Every live binding's stored definition, by id.
    package func bindingDefinitionsByID() -> [UInt64: JSONValue] {
        var definitions: [UInt64: JSONValue] = [:]
        for binding in bindingTable.all { definitions[binding.id] = binding.storedJSON }
        return definitions
    }

    /// The highest binding id ever handed out.
    package var lastBindingID: UInt64 { bindingTable.lastID }
}
