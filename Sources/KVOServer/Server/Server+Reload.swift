import KVOEngine
import KVOJSON
import KVOModel
import Logging

/// SIGHUP: the configuration read again (`ServerConfiguration.reload`), its live settings applied, the TLS
/// files and the users file read again. What cannot change while the server runs (listeners, storage,
/// cluster, history, size limits) keeps its running value: the daemon, which knows the flags, says so in
/// one warning line each. Loop thread only, like the rest of `Server`.
extension Server {
    /// Reloads what can change while the server runs. A configuration that cannot be read or is invalid
    /// changes nothing of the configuration (one error line); the TLS files and the users file are read
    /// again all the same, from the paths in force (a certificate rotation does not wait for a fixed file).
    func reloadOnHangup() {
        precondition(loop.isOnLoopThread, "Server.reloadOnHangup() must be called on the loop thread")
        logger.info("received signal SIGHUP: reloading")
        let runningTLS = configuration.tls
        if let reload = configuration.reload {
            do {
                applyLiveSettings(from: try reload())
            } catch {
                logger.error("configuration reload failed, keeping the running configuration: \(PrintableText.escaped("\(error)", limit: 2000))")
            }
        }
        if configuration.tls != nil, !reloadTLS() { configuration.tls = runningTLS }
        reloadUsersFile()
    }

    /// Takes from `fresh` the settings that can change while the server runs; the rest of `fresh` is ignored.
    /// Connections opened from now on get the new per-connection limits (line length, pending replies, first
    /// request and login timeouts, TLS handshake timeout); open ones keep theirs. The connection limit, the
    /// global output and input bounds, the idle timeout and the observations per connection apply at once: nothing
    /// already open or queued is closed for a lowered limit until it next passes the check.
    ///
    /// Keep in step with `ConfigurationReloader.liveSettings` in the daemon (the flags said to apply live).
    func applyLiveSettings(from fresh: ServerConfiguration) {
        configuration.settingsInForce = fresh.settingsInForce
        configuration.maximumConnections = fresh.maximumConnections
        configuration.maximumTotalOutputBytes = fresh.maximumTotalOutputBytes
        configuration.maximumTotalInputBytes = fresh.maximumTotalInputBytes
        configuration.maximumLineLength = fresh.maximumLineLength
        configuration.maximumPendingRequests = fresh.maximumPendingRequests
        configuration.firstRequestTimeout = fresh.firstRequestTimeout
        configuration.loginTimeout = fresh.loginTimeout
        if fresh.idleTimeout != configuration.idleTimeout {
            configuration.idleTimeout = fresh.idleTimeout
            idleSweep.change(to: fresh.idleTimeout, now: clock.milliseconds)
        }
        configuration.maximumObservationsPerConnection = fresh.maximumObservationsPerConnection
        handler.engine.maximumObservationsPerConnection = fresh.maximumObservationsPerConnection
        configuration.slowRequestMilliseconds = fresh.slowRequestMilliseconds
        slowLog.thresholdNanoseconds = fresh.slowRequestNanoseconds
        // `--max-disk`: raising it (or 0) takes writes again at the next storage check, within a second.
        if configuration.storage != nil {
            configuration.storage?.maximumDiskBytes = fresh.storage?.maximumDiskBytes ?? 0
            storage.checkAtNextTick()
        }
        // The files, client certificates and handshake timeout of the TLS listener; never its port, and never
        // a TLS listener added or removed.
        if let running = configuration.tls, var tls = fresh.tls {
            tls.port = running.port
            configuration.tls = tls
        }
    }

    /// `--users FILE` (in memory, single node): reads the file again and makes the server's users what it
    /// says. Removed users' connections are closed, users whose rules changed get them at once on their
    /// open connections, and the first user ends open mode; password and token changes need nothing more.
    /// A file that cannot be read, is invalid, or holds no users while the server has some (it never goes
    /// back to open mode while running) changes nothing: one error line.
    func reloadUsersFile() {
        // In cluster mode the users come from the stream (every node alike); with a store, from the store.
        guard cluster == nil, !storage.keepsWrites, let path = configuration.usersFile else { return }
        let fresh: UserDirectory
        do {
            fresh = try UsersFile.load(path)
        } catch {
            logger.error("users file reload failed, keeping the \(users.count) users: \(PrintableText.escaped(error.message, limit: 1000))")
            return
        }
        if fresh.isEmpty, !users.isEmpty {
            logger.error("users file reload: '\(PrintableText.escaped(path))' holds no users; keeping the \(users.count) users (kvod does not go back to open mode while it runs)")
            return
        }
        let before = Dictionary(uniqueKeysWithValues: users.users.map { ($0.name, $0) })
        let wasOpen = users.isEmpty
        users.replaceAll(with: fresh.users)
        compiledPolicies.forgetAll()
        let removed = before.keys.filter { fresh.user(named: $0) == nil }.sorted()
        let changedRules = fresh.users.filter { user in before[user.name].map { $0.rules != user.rules } ?? false }
        var closed = 0
        for name in removed {
            let open = connections(of: name)
            for connection in open { connection.close(reason: .userRemoved(name)) }
            closed += open.count
            handler.engine.recheckBindings(ofUser: name)
        }
        for user in changedRules {
            let policy = self.policy(ofUser: user.name) ?? AccessPolicy(rules: user.rules)
            for connection in connections(of: user.name) {
                connection.principal = Principal(user: user.name, policy: policy)
                principalDidChange(of: connection)
            }
            handler.engine.recheckBindings(ofUser: user.name)
        }
        deliverBindingEvents()
        let added = fresh.users.count - (before.count - removed.count)
        logger.notice("reloaded the users file: \(users.count) users (\(added) added, \(removed.count) removed, \(changedRules.count) with changed rules; \(closed) connection\(closed == 1 ? "" : "s") closed)")
        if wasOpen { endOpenMode() }
    }
}
