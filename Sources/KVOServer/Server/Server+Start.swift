import CLibUV
import KVOEngine
import KVOModel
#if canImport(Glibc)
import Glibc
#endif

/// Start-up after the state is restored (`ServerStartup`): the server's own libuv handles, the listeners (with the checks that
/// refuse to serve), and the signal handlers. Called once, by `init`, on the thread that creates the server.
extension Server {
    /// Initialises and starts the check, idle, async, housekeeping and cluster handles, each holding the server.
    func startOwnHandles() {
        uv_check_init(loop.raw, checkHandle)
        uv_idle_init(loop.raw, heldInput.idleHandle)
        retainOwner(self, in: heldInput.idleHandle)
        uv_async_init(loop.raw, asyncHandle, Server.asyncCallback)
        if let clusterNode {
            uv_async_init(loop.raw, clusterNode.asyncHandle, Server.clusterCallback)
            retainOwner(self, in: clusterNode.asyncHandle)
        }
        retainOwner(self, in: checkHandle)
        retainOwner(self, in: asyncHandle)
        uv_check_start(checkHandle, Server.checkCallback)
        uv_timer_init(loop.raw, groupCommit.timer)
        retainOwner(self, in: groupCommit.timer)
        uv_timer_init(loop.raw, housekeepingHandle)
        retainOwner(self, in: housekeepingHandle)
        // A manual clock's housekeeping runs when the test turns it (`advanceTime(by:)`), not on real time.
        if !clock.isManual {
            uv_timer_start(housekeepingHandle, Server.housekeepingCallback, Server.housekeepingInterval, Server.housekeepingInterval)
        }
    }

    /// The TLS context and the listeners; refuses to start (closing what it opened) without a listener, or
    /// with a listener others can reach while no users are defined (unless `--insecure-open`).
    func startListening() throws(ServerStartError) {
        do throws(ServerStartError) {
            if let tls = configuration.tls {
                do throws(TLSSetupError) {
                    tlsContext = try TLSContext(tls)
                } catch {
                    throw .tls(error)
                }
            }
            if configuration.http?.usesTLS == true, configuration.tls == nil {
                throw .configuration("the HTTP listener's TLS uses the TLS listener's certificate: set tls (--tls-port, --tls-cert, --tls-key)")
            }
            do throws(TransportError) {
                try bindListeners()
            } catch {
                throw .transport(error)
            }
            guard !listeners.isEmpty || configuration.isEmbedded else {
                throw .configuration("no listener: the plaintext port is off and neither a TLS nor an HTTP port nor a Unix socket is set")
            }
        } catch {
            closeListeners()
            closeOwnHandles()
            loop.run()  // let the close callbacks run
            _ = loop.close()
            closeStore()
            throw error
        }
        if users.isEmpty, !configuration.allowsInsecureOpen,
           let exposed = listeners.first(where: { !$0.isLoopback }) {
            let address = exposed.addressDescription
            closeListeners()
            closeOwnHandles()
            loop.run()
            _ = loop.close()
            closeStore()
            throw .configuration("""
                refusing to serve \(address) with no users defined (anyone who can connect could read and change \
                everything): add a user with `kvod user add`, listen on 127.0.0.1, or pass --insecure-open
                """)
        }
    }

    /// SIGINT and SIGTERM stop the server; SIGHUP reloads (`reloadOnHangup()`) whenever there is something to
    /// reload: a configuration (`ServerConfiguration.reload`), a TLS listener or a users file.
    func installSignalHandlers() {
        // A parent may have left these blocked (process launchers often do): unblock them, or
        // the handlers below would never run.
        var unblock = sigset_t()
        sigemptyset(&unblock)
        sigaddset(&unblock, SIGINT)
        sigaddset(&unblock, SIGTERM)
        sigaddset(&unblock, SIGHUP)
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        let reloads = configuration.reload != nil || configuration.tls != nil || configuration.usersFile != nil
        for signal in reloads ? [SIGINT, SIGTERM, SIGHUP] : [SIGINT, SIGTERM] {
            let handle = allocateHandle(uv_signal_t.self, kind: UV_SIGNAL)
            uv_signal_init(loop.raw, handle)
            retainOwner(self, in: handle)
            uv_signal_start(handle, Server.signalCallback, signal)
            signalHandles.append(handle)
        }
    }
}
