import ArgumentParser
import KVOJSON

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The argument of `define-class`: a file holding one class definition as a JSON object, or `-` for
/// standard input.
///
/// Everything that can go wrong (the file cannot be read, is not JSON, is not an object) is a usage
/// error (`ValidationError`, exit 2), found before kvoclient connects. Used on the main thread only.
enum ClassDefinitionFile {
    /// The path that stands for standard input.
    static let standardInput = "-"

    /// The JSON object in `path` (or on standard input for `-`).
    static func load(_ path: String) throws(ValidationError) -> [String: JSONValue] {
        let name = path == standardInput ? "standard input" : "'\(path)'"
        let bytes = try contents(of: path, name: name)
        let value: JSONValue
        do throws(JSONParseError) {
            value = try JSONParser.parse(bytes)
        } catch {
            throw ValidationError("the class definition in \(name) is not valid JSON: \(error)")
        }
        guard let definition = value.objectValue else {
            throw ValidationError("the class definition in \(name) must be a JSON object, but it holds a JSON \(value.typeName)")
        }
        return definition
    }

    /// Every byte of the file, or of standard input.
    private static func contents(of path: String, name: String) throws(ValidationError) -> [UInt8] {
        let descriptor = path == standardInput ? 0 : open(path, O_RDONLY)
        guard descriptor >= 0 else { throw failure(reading: name) }
        defer { if descriptor != 0 { close(descriptor) } }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count == 0 { return bytes }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure(reading: name)
            }
            bytes.append(contentsOf: chunk[..<count])
        }
    }

    /// The error for a failed `open` or `read`, with `strerror(errno)`.
    private static func failure(reading name: String) -> ValidationError {
        ValidationError("cannot read the class definition file \(name): \(String(cString: strerror(errno)))")
    }
}
