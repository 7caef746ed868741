import Foundation
import KVOWireProbe

/// Throwaway certificates for one TLS test, made with the `openssl` command in a temporary directory
/// (removed with the value; no key is ever committed): a CA, a second unrelated CA, server certificates for
/// 127.0.0.1 and localhost (a current one, a second one for reloads, an expired one) and client
/// certificates (CN alice from the CA, CN mallory from the other CA). EC P-256 keys: quick to make.
final class TestCertificates: @unchecked Sendable {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory("tls")
        try makeAuthority("ca", commonName: "kvod test CA")
        try makeAuthority("other-ca", commonName: "another CA")
        try makeLeaf("server", commonName: "kvod-server", authority: "ca", server: true)
        try makeLeaf("server2", commonName: "kvod-server-2", authority: "ca", server: true)
        try makeLeaf("other-server", commonName: "kvod-other", authority: "other-ca", server: true)
        try makeLeaf("client", commonName: "alice", authority: "ca", server: false)
        try makeLeaf("mallory", commonName: "mallory", authority: "other-ca", server: false)
        try makeExpiredServerCertificate()
    }

    func path(_ name: String) -> String { directory.appending(name) }

    /// kvod's TLS flags for `--tls-port 0` with certificate `name` (`server`, `server2`, `expired`, ...).
    func serverArguments(_ name: String = "server", clientAuth: String? = nil) -> [String] {
        var arguments = ["--tls-port", "0", "--tls-cert", path("\(name).pem"), "--tls-key", path("\(name).key")]
        if let clientAuth { arguments += ["--tls-ca", path("ca.pem"), "--tls-client-auth", clientAuth] }
        return arguments
    }

    /// Client options trusting `authority` (`ca` or `other-ca`), presenting `client`'s certificate if given.
    func clientOptions(trusting authority: String = "ca", client: String? = nil) -> TLSClientOptions {
        TLSClientOptions(certificateAuthorityPath: path("\(authority).pem"),
                         certificatePath: client.map { path("\($0).pem") }, privateKeyPath: client.map { path("\($0).key") })
    }

    private func makeAuthority(_ name: String, commonName: String) throws {
        try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", path("\(name).key"), "-out", path("\(name).pem"), "-days", "2", "-subj", "/CN=\(commonName)"])
    }

    private func makeRequest(_ name: String, commonName: String, server: Bool) throws {
        var arguments = ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                         "-keyout", path("\(name).key"), "-out", path("\(name).csr"), "-subj", "/CN=\(commonName)"]
        if server { arguments += ["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"] }
        try openssl(arguments)
    }

    private func makeLeaf(_ name: String, commonName: String, authority: String, server: Bool) throws {
        try makeRequest(name, commonName: commonName, server: server)
        try openssl(["x509", "-req", "-in", path("\(name).csr"), "-CA", path("\(authority).pem"),
                     "-CAkey", path("\(authority).key"), "-CAcreateserial", "-out", path("\(name).pem"), "-days", "2",
                     "-copy_extensions", "copyall"])
    }

    /// A server certificate from the CA that was valid for one day in 2020 (`openssl ca` takes explicit dates).
    private func makeExpiredServerCertificate() throws {
        try makeRequest("expired", commonName: "kvod-expired", server: true)
        let authorityDirectory = path("expired-ca")
        try FileManager.default.createDirectory(atPath: authorityDirectory, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: authorityDirectory + "/index.txt", contents: Data())
        try "1000\n".write(toFile: authorityDirectory + "/serial", atomically: true, encoding: .utf8)
        let configuration = """
            [ ca ]
            default_ca = test
            [ test ]
            dir = \(authorityDirectory)
            database = $dir/index.txt
            new_certs_dir = $dir
            serial = $dir/serial
            default_md = sha256
            policy = any
            copy_extensions = copy
            unique_subject = no
            [ any ]
            commonName = supplied
            """
        try configuration.write(toFile: authorityDirectory + "/ca.cnf", atomically: true, encoding: .utf8)
        try openssl(["ca", "-batch", "-config", authorityDirectory + "/ca.cnf", "-cert", path("ca.pem"),
                     "-keyfile", path("ca.key"), "-in", path("expired.csr"), "-out", path("expired.pem"),
                     "-startdate", "20200101000000Z", "-enddate", "20200102000000Z", "-notext"])
    }

    private func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        // Its messages go to a file, read only on failure (no pipe to drain meanwhile).
        let log = path("openssl.log")
        FileManager.default.createFile(atPath: log, contents: Data())
        let errors = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        defer { try? errors.close() }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw TestCertificatesError.openssl(arguments: arguments, output: output)
        }
    }
}

/// `openssl` failed while making test certificates.
enum TestCertificatesError: Error {
    case openssl(arguments: [String], output: String)
}
