/// A place where a value is stored: a key path inside one stored object (array indexes as keys).
struct StoredLocation: Hashable {
    let object: String
    let path: [String]

    func appending(_ key: String) -> StoredLocation {
        StoredLocation(object: object, path: path + [key])
    }
}
