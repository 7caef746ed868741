import KVOJSON
import KVOModel

/// Reading for a principal: how the engine names what a reader was refused.
///
/// The read rule (docs/protocol.md, "Permissions"): nothing of an object a reader may not read reaches
/// that reader, in a reply, an event, a replay or an error. Two mechanisms keep it, and every path uses
/// one of them:
/// - a reading made for one reader (`get`, and naming a refusal here) passes the reader to
///   `KeyPathEvaluator`, which checks each object before anything in it is looked at;
/// - a reading shared by many recipients (watched paths, pattern observations, bindings' sources,
///   replays) is made once without a reader and each recipient is checked against the objects it
///   depended on (`ConnectionAccess.allowsRead`), which says only yes or no.
/// When a shared reading says no, the refusal's wording comes from a reading for that reader, so the
/// object named is the first one the reader could reach, never one that lies behind another refused
/// object. Loop thread only, as the engine.
extension KVOEngine {
    /// The `forbidden` error for `reader` reading `keyPath` of `object`: it names the first object the
    /// reading reached that `reader` may not read. Call it once a shared reading's dependencies were
    /// refused; should nothing be refused now, it names `object`.
    func refusal(reading object: String, _ keyPath: KeyPath, for reader: ConnectionAccess) -> KVOError {
        ConnectionAccess.forbidden(.read, on: firstRefused(reading: object, keyPath, for: reader) ?? object,
                                   user: reader.user)
    }

    /// The first object `reader` is refused when reading `keyPath` of `object` (nil when none).
    func firstRefused(reading object: String, _ keyPath: KeyPath, for reader: ConnectionAccess) -> String? {
        let reading = try? KeyPathEvaluator.evaluate(keyPath, of: object, in: objects, strict: false,
                                                     classes: classes, memo: computedMemo, reader: reader)
        return reading?.deniedObject
    }
}
