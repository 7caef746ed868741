import CLibUV
import KVOEngine
import KVOJSON
import KVOModel
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Fan-out: each change notification encoded once per variant and copied to each recipient connection (the per-event hot path), and binding events.
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// Tells bindings' creators, if still connected, what the request did to their bindings (removed
    /// with a deleted object, a write refused), and logs it. Rare: most requests produce none.
    func deliverBindingEvents() {
        let events = handler.engine.takeBindingEvents()
        for event in events {
            logger.notice("\(event.logDescription)")
            guard let creator = event.creator, let connection = connection(creator) else { continue }
            connection.takeUnretainedValue().enqueue(event.line)
        }
        if !events.isEmpty, loop.outputChunks.bytesInUse > configuration.maximumTotalOutputBytes { enforceTotalOutputLimit() }
        flushEarlyIfOutputIsLarge()
    }

    /// The open connection with `id`, found by its slot (unretained: see `slots`).
    @inline(__always)
    func connection(_ id: ConnectionID) -> Unmanaged<Connection>? {
        let slot = Int(id.slot)
        guard slot < slots.count, let connection = slots[slot],
              connection._withUnsafeGuaranteedRef({ $0.id.rawValue }) == id.rawValue
        else { return nil }
        return connection
    }

    /// Fans each notification out to its recipients, encoding it once per option variant. This is
    /// the per-event hot path. A first pass over the recipients finds which tail variants they need;
    /// each is appended once to `tailArena`. The second pass costs, per recipient, an array lookup of
    /// its connection by slot and the copies into its output chunks (the head as three word stores,
    /// the subscription id written in place, one `memcpy` of the shared tail), with no reference
    /// counting (connections and tails are reached through unretained pointers). When all recipients
    /// share one variant (the usual case) the second pass does not look at their options at all.
    /// Each recipient's head is the full or the compact one by its variant's `compactVariantBit` (the
    /// encoding its observation was made with), so the tails stay shared per encoding.
    /// `deliver(_:fullHead:compactHead:)` makes no further copy of the notification (`EventEncoder`'s
    /// static functions take it as a parameter): a copy retains and releases its strings, values and
    /// recipient list, and the encoder instance used before (holding a copy, and copied in turn) cost
    /// about 1,100 instructions per event.
    func deliverNotifications() {
        // Every engine request is followed by this: the ephemeral objects it removed leave their sessions.
        if !handler.engine.removedWatchedObjects.isEmpty { noteRemovedEphemeralObjects() }
        let fullHead = EventEncoder.headWords
        let compactHead = EventEncoder.compactHeadWords
        // By index: the array's element is lent to `deliver`; a `for in` loop would copy each one.
        for index in notifications.indices {
            deliver(notifications[index], fullHead: fullHead, compactHead: compactHead)
        }
        if tailArena.capacity > Server.retainedScratchBytes { tailArena = [] }
    }

    /// One notification of `deliverNotifications()`.
    func deliver(_ notification: borrowing ChangeNotification, fullHead: (UInt64, UInt64, UInt64),
                         compactHead: (UInt64, UInt64, UInt64)) {
        let chooser = EventEncoder.VariantChooser(notification)
        var values = EventEncoder.EncodedValues(notification)
        let recipients = notification.recipients
        var neededVariants = 0
        for recipient in recipients {
            neededVariants |= 1 << chooser.variant(for: recipient.options)
        }
        tailArena.removeAll(keepingCapacity: true)
        for variant in 0..<EventEncoder.variantCount where neededVariants & (1 << variant) != 0 {
            tailStarts[variant] = tailArena.count
            EventEncoder.appendTail(variant: variant, of: notification, values: &values, to: &tailArena)
            tailEnds[variant] = tailArena.count
        }
        let onlyVariant = neededVariants.nonzeroBitCount == 1 ? neededVariants.trailingZeroBitCount : nil
        var queuedBytes = 0
        tailArena.withUnsafeBytes { arena in
            let sharedTail = onlyVariant.map { UnsafeRawBufferPointer(rebasing: arena[tailStarts[$0]..<tailEnds[$0]]) }
            let sharedIsCompact = (onlyVariant ?? 0) & EventEncoder.compactVariantBit != 0
            for recipient in recipients {
                guard let connection = connection(recipient.connection) else { continue }
                let tail: UnsafeRawBufferPointer
                let isCompact: Bool
                if let sharedTail {
                    tail = sharedTail
                    isCompact = sharedIsCompact
                } else {
                    let variant = chooser.variant(for: recipient.options)
                    tail = UnsafeRawBufferPointer(rebasing: arena[tailStarts[variant]..<tailEnds[variant]])
                    isCompact = variant & EventEncoder.compactVariantBit != 0
                }
                queuedBytes &+= tail.count
                connection._withUnsafeGuaranteedRef {
                    if isCompact {
                        $0.enqueueEvent(head: compactHead, headLength: EventEncoder.compactHeadLength,
                                        subscription: recipient.subscription, tail: tail)
                    } else {
                        $0.enqueueEvent(head: fullHead, headLength: EventEncoder.fullHeadLength,
                                        subscription: recipient.subscription, tail: tail)
                    }
                }
            }
        }
        eventBytesSinceFlush += queuedBytes
        metrics.eventsSent &+= UInt64(recipients.count)
        metrics.eventBytesSent &+= UInt64(queuedBytes)
        // Once per notification, not per recipient: the pool counts bytes as chunks are taken.
        if loop.outputChunks.bytesInUse > configuration.maximumTotalOutputBytes { enforceTotalOutputLimit() }
    }
}
