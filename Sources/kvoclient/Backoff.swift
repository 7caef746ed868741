#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Exponential backoff with jitter between reconnection attempts.
///
/// The nominal delay starts at `initial` and doubles after each failed attempt up to `maximum`;
/// each wait is drawn uniformly from the upper half of the nominal delay, so that many clients cut
/// off by the same restart do not all come back in the same instant. `reset()` after a success.
struct Backoff {
    let initial: Double
    let maximum: Double
    private var nominal: Double

    /// `initial` and `maximum` in seconds.
    init(initial: Double = 0.1, maximum: Double = 5) {
        self.initial = initial
        self.maximum = maximum
        nominal = initial
    }

    /// The next wait in seconds (between half the nominal delay and the nominal delay), and doubles
    /// the nominal delay for the attempt after it.
    mutating func nextDelay() -> Double {
        let delay = Double.random(in: (nominal / 2)...nominal)
        nominal = min(nominal * 2, maximum)
        return delay
    }

    /// Starts over from `initial`.
    mutating func reset() {
        nominal = initial
    }

    /// Sleeps `seconds` in slices of at most 50 ms; returns false early if SIGINT or SIGTERM
    /// arrived (then the caller should stop), true after the full wait.
    static func sleep(_ seconds: Double) -> Bool {
        var remaining = seconds
        while remaining > 0 {
            if InterruptFlag.isSet { return false }
            let slice = min(remaining, 0.05)
            usleep(useconds_t(slice * 1_000_000))
            remaining -= slice
        }
        return !InterruptFlag.isSet
    }
}
