import Observation

/// An `@Observable` mirror of one kvod object, decoded as `Value` and kept up to date, for SwiftUI-style
/// code: read `value` in a view (or in `withObservationTracking`) and it re-renders when the object changes.
///
/// The protocol observes key paths, not whole objects, so the mirror observes each top-level key
/// `Value` decodes (found by decoding `Value` once from a key-recording decoder, or given with `keys:`)
/// with `[.initial, .new]`, keeps the latest JSON of each key, and decodes the assembled object again on
/// every change. `value` is nil until every key's initial value arrived (a key the object lacks counts as
/// absent: `Value` must then declare it optional), and again after the object is deleted. Each key's
/// changes come in order; a write that changes several keys (a `set` of a whole object) shows as one
/// change per key.
///
/// Isolation: not `Sendable`; it belongs to the actor it was made on (`#isolation`, e.g. the main actor)
/// and its properties change only there. Lifetime like an `ObservationToken`: `cancel()` or dropping the
/// last reference unobserves every key on the server.
///
/// `Observable` (the Observation module) is written out here rather than with the `@Observable` macro
/// (kept from when this module had a public type named `Observation`, which the macro's expansion
/// `Observation.ObservationRegistrar` then resolved to; it is `KVOObservation` now).
/// It is what the macro generates: every read goes through `access`, every write through `withMutation`.
/// Needs the Observation module: macOS 14, iOS 17, tvOS 17, watchOS 10 or later on Apple platforms (the rest of
/// KVOClient needs macOS 13).
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
public final class RemoteObject<Value: Decodable & Sendable>: Observable {
    private let registrar = ObservationRegistrar()

    /// The object as last decoded; nil before every key arrived, after a decoding failure (see
    /// `error`), and after the object was deleted.
    public private(set) var value: Value? {
        get { registrar.access(self, keyPath: \.value); return storedValue }
        set { registrar.withMutation(of: self, keyPath: \.value) { storedValue = newValue } }
    }
    /// The revision of the last change applied (0 before any).
    public private(set) var rev: Int64 {
        get { registrar.access(self, keyPath: \.rev); return storedRev }
        set { registrar.withMutation(of: self, keyPath: \.rev) { storedRev = newValue } }
    }
    /// Why `value` is nil or stale: the object was deleted (`KVODError.server` with `notFound` then), a
    /// key's observation was refused or ended, or the assembled object did not decode as `Value`.
    public private(set) var error: KVODError? {
        get { registrar.access(self, keyPath: \.error); return storedError }
        set { registrar.withMutation(of: self, keyPath: \.error) { storedError = newValue } }
    }
    /// True after `sourceDeleted`: the object no longer exists (nothing is observed any more).
    public private(set) var isDeleted: Bool {
        get { registrar.access(self, keyPath: \.isDeleted); return storedIsDeleted }
        set { registrar.withMutation(of: self, keyPath: \.isDeleted) { storedIsDeleted = newValue } }
    }

    private var storedValue: Value?
    private var storedRev: Int64 = 0
    private var storedError: KVODError?
    private var storedIsDeleted = false

    /// The object's name on the server.
    public let object: String
    /// The top-level keys observed.
    public let keys: [String]
    /// The latest JSON of each key received so far (a missing key: `.null`).
    private var fields: [String: JSONValue] = [:]
    /// One observation per key.
    private var tokens: [ObservationToken] = []

    /// Mirrors `object` through `client`, observing `keys` (by default those `Value` decodes). Throws
    /// `KVODError.coding` when the keys cannot be found by decoding. Server errors (`not_found`, ...)
    /// arrive in `error`. Changes are applied on `isolation` (the caller's actor by default).
    public init(_ client: KVOClient, _ object: String, as type: Value.Type = Value.self, keys: [String]? = nil,
                isolation: isolated (any Actor)? = #isolation) throws(KVODError) {
        self.object = object
        if let keys { self.keys = keys } else { self.keys = try TopLevelKeys.of(Value.self) }
        for key in self.keys {
            let token = client.observe(key, of: object, options: [.initial, .new], as: JSONValue.self, isolation: isolation) { [weak self] change in
                self?.apply(change, to: key)
            }
            tokens.append(token)
            // How the key's observation ended, for `error` (holds the delivery task, not the token).
            let delivery = token.delivery
            Task { [weak self] in
                _ = isolation
                do {
                    try await delivery.value
                } catch let failure as KVODError {
                    self?.failed(failure)
                } catch {}
            }
        }
    }

    /// The top-level keys `Value` decodes, in the order it reads them, as the mirror finds them when no
    /// `keys:` are given. Throws `KVODError.coding` when decoding placeholders fails (see `init`).
    public static func keys(of type: Value.Type = Value.self) throws(KVODError) -> [String] {
        try TopLevelKeys.of(type)
    }

    deinit {
        for token in tokens { token.cancel() }
    }

    /// Stops mirroring: unobserves every key; `value` keeps its last state. Safe twice.
    public func cancel() {
        for token in tokens { token.cancel() }
    }

    /// Waits until the server accepted every key's observation; throws the first refusal. Runs on the
    /// caller's actor (the mirror is not `Sendable`).
    public func subscribed(isolation: isolated (any Actor)? = #isolation) async throws {
        for token in tokens { try await token.subscribed() }
    }

    /// A key's observation ended with `failure` (refused, or the client closed).
    private func failed(_ failure: KVODError) {
        if !isDeleted { error = failure }
    }

    /// Records one key's change and decodes the object again once every key is known.
    private func apply(_ change: Change<JSONValue>, to key: String) {
        // A signal is no value of the object's keys.
        guard !isDeleted, change.reason != .signal else { return }
        rev = max(rev, change.rev)
        switch change.reason {
        case .sourceDeleted:
            isDeleted = true
            value = nil
            error = .server(code: .notFound, message: "\(object) was deleted", details: .init(["object": .string(object)]))
            cancel()
            return
        case .forbidden:
            error = .server(code: .forbidden, message: "\(key) of \(object) is no longer readable", details: .init())
            return
        default:
            break
        }
        fields[key] = change.rawNew ?? .null
        guard fields.count == keys.count else { return }
        // Absent keys are left out, so that optionals decode as nil.
        let present = fields.filter { $0.value != .null }
        do throws(KVODError) {
            value = try ValueCoding.decode(Value.self, from: .object(present))
            error = nil
        } catch let failure {
            value = nil
            error = failure
        }
    }
}
