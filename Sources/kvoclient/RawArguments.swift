/// The command line as the bytes the process received, before Swift decodes it.
///
/// `CommandLine.arguments` replaces bytes that are not UTF-8 with U+FFFD, so an object id, key path or
/// value given in another encoding would silently become a different text. Every argument must be
/// valid UTF-8 (the protocol is UTF-8 JSON): `main` refuses the command line otherwise, naming the
/// argument. Reads `CommandLine.unsafeArgv`; call from the main thread at start-up.
enum RawArguments {
    /// The first argument (1 for the first after the program name) that is not valid UTF-8, shown
    /// with printable ASCII as is and every other byte as `\xFF`.
    static func firstInvalidUTF8() -> (position: Int, shown: String)? {
        for position in 1..<Int(CommandLine.argc) {
            guard let pointer = CommandLine.unsafeArgv[position] else { continue }
            if String(validatingCString: pointer) != nil { continue }
            var shown = ""
            var cursor = pointer
            while cursor.pointee != 0 {
                let byte = UInt8(bitPattern: cursor.pointee)
                if (0x20..<0x7F).contains(byte), byte != UInt8(ascii: "\\") {
                    shown.unicodeScalars.append(Unicode.Scalar(byte))
                } else {
                    let hex = String(byte, radix: 16, uppercase: true)
                    shown += "\\x" + (hex.count == 1 ? "0" + hex : hex)
                }
                cursor += 1
            }
            return (position, shown)
        }
        return nil
    }
}
