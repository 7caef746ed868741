/// A place where a value is stored: a key path inside one stored object (array indexes as keys).
package struct StoredLocation: Hashable {
    public let object: String
    public let path: [String]

    package init(object: String, path: [String]) {
        self.object = object
        self.path = path
    }

    package func appending(_ key: String) -> StoredLocation {
        StoredLocation(object: object, path: path + [key])
    }
}
