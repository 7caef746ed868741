import CLibUV
import CSodium
import KVOJSON
import KVOModel
import KVOEngine

/// One `auth` request's password check, from the moment it is queued until its result is back on
/// the loop thread.
///
/// Created and finished on the loop thread; between `uv_queue_work` and its after-work callback
/// only the thread pool touches it (`run()`), so the two never overlap (libuv orders them).
final class PasswordVerification: @unchecked Sendable {
    let connection: ConnectionID
    /// The peer's address without its port ("127.0.0.1"), for fair scheduling.
    let peerHost: String
    /// The name asked for, and whether such a user existed when the check was queued (when not, a
    /// dummy hash of the users' most common cost is checked so that the answer takes as long:
    /// `UserDirectory.unknownUserHash`).
    let userName: String
    let userExists: Bool
    /// The request's `id`, echoed in the reply.
    let requestID: JSONValue?
    /// The connection's failures before this check (scheduling key).
    let connectionFailures: Int
    /// Arrival order (ties in the scheduling key go first come, first served).
    let sequence: UInt64
    /// The hash checked, NUL-terminated: the user's, or for an unknown user the dummy one given
    /// (`PasswordHasher.dummyHash` when none was).
    private let hash: [CChar]
    /// The hash checked, to see on return whether the password changed meanwhile (nil: unknown user).
    let checkedHash: String?
    /// The password; wiped once checked or dropped.
    private var password: [UInt8]
    /// Set by `run()` on the thread pool; read on the loop thread after it.
    private(set) var matched = false
    /// libuv's work request while running (nil while waiting in the queue).
    var work: UnsafeMutablePointer<uv_work_t>?
    /// `uv_hrtime()` when the loop began handling the `auth` request (`Server.requestStarted`), for its
    /// duration once answered; 0: unknown.
    let requestStarted: UInt64

    init(connection: ConnectionID, peerHost: String, userName: String, userExists: Bool, requestID: JSONValue?,
         connectionFailures: Int, sequence: UInt64, hash: String?, password: String, requestStarted: UInt64 = 0) {
        self.connection = connection
        self.peerHost = peerHost
        self.userName = userName
        self.userExists = userExists
        self.requestID = requestID
        self.connectionFailures = connectionFailures
        self.sequence = sequence
        self.hash = hash.map { Array($0.utf8CString) } ?? []
        self.checkedHash = userExists ? hash : nil
        self.password = Array(password.utf8)
        self.requestStarted = requestStarted
    }

    deinit { wipePassword() }

    /// The check itself: slow by design (Argon2id). Thread pool only.
    func run() {
        let hash = self.hash.isEmpty ? Array(PasswordHasher.dummyHash.utf8CString) : self.hash
        matched = password.withUnsafeBufferPointer { password in
            hash.withUnsafeBufferPointer { PasswordHasher.verify(password, against: $0.baseAddress!) }
        }
        // An unknown user never matches, whatever the dummy hash says.
        if !userExists { matched = false }
        wipePassword()
    }

    func wipePassword() {
        guard !password.isEmpty else { return }
        password.withUnsafeMutableBytes { sodium_memzero($0.baseAddress, $0.count) }
        password = []
    }
}
