import ArgumentParser
import KVOCommandLine
import KVOEngine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

/// Argon2id cost of a new hash (`--hash-cost`).
extension PasswordHasher.Cost: ExpressibleByArgument {}

/// Reads a new password: KVOD_PASSWORD, or asked twice on a terminal.
func readNewPassword(for name: String) throws -> String {
    do {
        return try SecretInput.read(environmentVariable: "KVOD_PASSWORD", prompt: "Password for \(name): ", confirm: true)
    } catch {
        throw ValidationError("no password: \(error)")
    }
}

/// Parses `PATTERN=PERMS` words.
func parseRules(_ words: [String]) throws -> [AccessRule] {
    var rules: [AccessRule] = []
    for word in words {
        do { rules.append(try AccessRule(argument: word)) } catch {
            throw ValidationError("'\(PrintableText.escaped(word, limit: 200))': \(error.message)")
        }
    }
    return rules
}

/// `sensor-*=read,write`.
func ruleText(_ rule: AccessRule) -> String { "\(rule.objects.text)=\(rule.allow.description)" }
