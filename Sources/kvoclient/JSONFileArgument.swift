import ArgumentParser
import KVOJSON

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A command's file argument holding one JSON value, or `-` for standard input: `define-class`'s class
/// definition (an object), `batch`'s writes (an array).
///
/// Everything that can go wrong (the file cannot be read, is not JSON, is not of the shape asked for) is a
/// usage error (`ValidationError`, exit 2), found before kvoclient connects. Used on the main thread only.
enum JSONFileArgument {
    /// The path that stands for standard input.
    static let standardInput = "-"

    /// The JSON value in `path` (or on standard input for `-`); `what` names it in errors ("class definition").
    static func load(_ path: String, what: String) throws(ValidationError) -> JSONValue {
        let name = path == standardInput ? "standard input" : "'\(path)'"
        let bytes = try contents(of: path, name: name, what: what)
        do throws(JSONParseError) {
            return try JSONParser.parse(bytes, wideIntegers: .refused)
        } catch {
            throw ValidationError("the \(what) in \(name) is not valid JSON: \(error)")
        }
    }

    /// The JSON object in `path`.
    static func object(_ path: String, what: String) throws(ValidationError) -> [String: JSONValue] {
        let value = try load(path, what: what)
        guard let object = value.objectValue else {
            throw ValidationError("the \(what) in \(name(of: path)) must be a JSON object, but it holds a JSON \(value.typeName)")
        }
        return object
    }

    /// The JSON array in `path`.
    static func array(_ path: String, what: String) throws(ValidationError) -> [JSONValue] {
        let value = try load(path, what: what)
        guard case let .array(elements) = value else {
            throw ValidationError("the \(what) in \(name(of: path)) must be a JSON array, but it holds a JSON \(value.typeName)")
        }
        return elements
    }

    /// `load` for a command's `run()`: a file that cannot be read or is not of the shape asked for is a usage
    /// error about its contents, printed without a usage line (it would be the root command's), exit 2.
    static func orExit<Value>(_ load: () throws(ValidationError) -> Value) throws -> Value {
        do throws(ValidationError) {
            return try load()
        } catch {
            Terminal.printError(error.message)
            throw ExitCode(KVOClientCommand.usageExitCode)
        }
    }

    private static func name(of path: String) -> String {
        path == standardInput ? "standard input" : "'\(path)'"
    }

    /// Every byte of the file, or of standard input.
    private static func contents(of path: String, name: String, what: String) throws(ValidationError) -> [UInt8] {
        let descriptor = path == standardInput ? 0 : open(path, O_RDONLY)
        guard descriptor >= 0 else { throw failure(reading: name, what: what) }
        defer { if descriptor != 0 { close(descriptor) } }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count == 0 { return bytes }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure(reading: name, what: what)
            }
            bytes.append(contentsOf: chunk[..<count])
        }
    }

    /// The error for a failed `open` or `read`, with `strerror(errno)`.
    private static func failure(reading name: String, what: String) -> ValidationError {
        ValidationError("cannot read the \(what) file \(name): \(String(cString: strerror(errno)))")
    }
}
