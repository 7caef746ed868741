import ArgumentParser
import KVOCommandLine
import KVOJSON

/// Argon2id cost of a new hash (`--hash-cost`).
enum HashCostArgument: String, ExpressibleByArgument {
    case interactive, moderate, minimal
}
