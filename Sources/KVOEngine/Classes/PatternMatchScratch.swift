import CPCRE2
import Glibc

/// The per-thread working memory of PCRE2 matching: one match context (which carries the work limits) and
/// one match data block (which keeps PCRE2's backtracking frames between matches, so a match allocates
/// nothing once the thread has matched a pattern as demanding before).
///
/// A compiled pattern is shared between threads (class definitions are), but a match context and a match
/// data block may be used by one thread at a time, so each thread gets its own, created on its first match
/// and released when the thread ends. Only `current` hands one out, and only to the calling thread: the
/// scratch never crosses threads, so it needs no lock.
final class PatternMatchScratch {
    /// The match context: heap and depth limits set once; the match limit set before each match.
    let context: OpaquePointer
    /// Room for the whole match's offsets only (matching asks only whether there is a match).
    let matchData: OpaquePointer
    /// Whether the thread is checking one write (`beginWrite()` … `endWrite()`): then the matches it
    /// makes share the write's budget (`CompiledPattern.stepBudget(forMatch:)`).
    private(set) var isInWrite = false
    /// The matches made so far in the current write.
    private(set) var matchesInWrite = 0

    private init() {
        guard let context = pcre2_match_context_create_8(nil), let matchData = pcre2_match_data_create_8(1, nil) else {
            fatalError("PCRE2 cannot allocate a match context")
        }
        pcre2_set_heap_limit_8(context, UInt32(CompiledPattern.heapLimitKiB))
        pcre2_set_depth_limit_8(context, UInt32(CompiledPattern.depthLimit))
        self.context = context
        self.matchData = matchData
    }

    /// Starts the checks of one write (or one class definition's defaults): the matches until
    /// `endWrite()` share one budget. Not nested: a second `beginWrite()` starts over.
    func beginWrite() {
        isInWrite = true
        matchesInWrite = 0
    }

    /// Ends the checks of one write: later matches get the whole budget again until the next write.
    func endWrite() {
        isInWrite = false
        matchesInWrite = 0
    }

    /// Counts a match and returns its number within the current write (1 outside a write).
    func countMatch() -> Int {
        guard isInWrite else { return 1 }
        matchesInWrite += 1
        return matchesInWrite
    }

    deinit {
        pcre2_match_data_free_8(matchData)
        pcre2_match_context_free_8(context)
    }

    /// The thread-specific slot that holds each thread's scratch (retained; released when the thread ends).
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { pointer in
            guard let pointer else { return }
            Unmanaged<PatternMatchScratch>.fromOpaque(pointer).release()
        }
        precondition(status == 0, "pthread_key_create failed (\(status))")
        return key
    }()

    /// The calling thread's scratch, created on first use. Use it on the calling thread only.
    static var current: PatternMatchScratch {
        if let pointer = pthread_getspecific(key) {
            return Unmanaged<PatternMatchScratch>.fromOpaque(pointer).takeUnretainedValue()
        }
        let scratch = PatternMatchScratch()
        pthread_setspecific(key, Unmanaged.passRetained(scratch).toOpaque())
        return scratch
    }
}
