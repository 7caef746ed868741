import ArgumentParser
import KVOCommandLine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

/// A `kvod user` failure: printed as "kvod user: error: <message>" (`KVOD.main`), exit status 1.
struct UserCommandError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
