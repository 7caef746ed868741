/// The last `capacity` elements appended, oldest dropped first (Redis's SLOWLOG list): appending costs one store
/// once full, and memory stays bounded whatever comes. A value; used on one thread at a time.
struct BoundedRing<Element> {
    let capacity: Int
    private var storage: [Element] = []
    /// Where the next element goes once `storage` is full (then also the oldest).
    private var next = 0
    /// Every element ever appended, dropped ones included (since the last `removeAll`).
    private(set) var appended: UInt64 = 0

    init(capacity: Int) {
        precondition(capacity > 0, "a ring holds at least one element")
        self.capacity = capacity
    }

    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }

    mutating func append(_ element: Element) {
        appended &+= 1
        if storage.count < capacity {
            storage.append(element)
            return
        }
        storage[next] = element
        next = (next + 1) % capacity
    }

    /// The elements, newest first.
    var newestFirst: [Element] {
        guard storage.count == capacity else { return storage.reversed() }
        return (storage[next...] + storage[..<next]).reversed()
    }

    mutating func removeAll() {
        storage.removeAll()
        next = 0
        appended = 0
    }
}
