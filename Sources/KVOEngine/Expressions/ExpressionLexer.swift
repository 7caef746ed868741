import KVOJSON

/// Splits an expression's source into tokens, ending with one `.end` token.
///
/// Works on the source's Characters, so columns count Characters. Whitespace (space, tab, CR, LF)
/// separates tokens; a key path or variable is one token and has no spaces inside. A short-lived
/// value used by `Expression.parse`; any thread.
struct ExpressionLexer {
    private let characters: [Character]
    private var position = 0
    private var tokens: [ExpressionToken] = []

    private init(_ source: String) {
        characters = Array(source)
    }

    /// The tokens of `source`; a lexical error (bad character, number, string or key path) throws.
    static func tokens(of source: String) throws(ExpressionError) -> [ExpressionToken] {
        var lexer = ExpressionLexer(source)
        try lexer.run()
        return lexer.tokens
    }

    /// 1-based column of the character at `index`.
    private func column(_ index: Int) -> Int { index + 1 }

    private func character(at index: Int) -> Character? {
        index < characters.count ? characters[index] : nil
    }

    private mutating func run() throws(ExpressionError) {
        while let current = character(at: position) {
            let start = position
            if current == " " || current == "\t" || current == "\n" || current == "\r" || current == "\r\n" {
                position += 1
            } else if current.isExpressionDigit {
                try lexNumber()
            } else if current.isExpressionIdentifierStart {
                try lexKeyPathOrKeyword()
            } else if current == "$" {
                try lexVariable()
            } else if current == "\"" || current == "'" {
                try lexString(quote: current)
            } else if let symbol = lexSymbol() {
                tokens.append(ExpressionToken(kind: .symbol(symbol), column: column(start)))
            } else {
                throw .syntax(unexpectedCharacterMessage(current), at: column(start))
            }
        }
        tokens.append(ExpressionToken(kind: .end, column: column(characters.count)))
    }

    private func unexpectedCharacterMessage(_ character: Character) -> String {
        switch character {
        case "=": return "unexpected '=' (comparison is '==')"
        case "&": return "unexpected '&' ('and' is '&&')"
        case "|": return "unexpected '|' ('or' is '||')"
        default: return "unexpected character '\(character)'"
        }
    }

    /// Reads an operator or punctuation mark, longest match first.
    private mutating func lexSymbol() -> ExpressionToken.Symbol? {
        let first = characters[position]
        if let second = character(at: position + 1),
           let pair = ExpressionToken.Symbol(rawValue: String(first) + String(second)) {
            position += 2
            return pair
        }
        guard let single = ExpressionToken.Symbol(rawValue: String(first)) else { return nil }
        position += 1
        return single
    }

    /// Reads digits, an optional fraction and an optional exponent: an integer becomes `.int`,
    /// anything with a fraction or exponent `.double`.
    private mutating func lexNumber() throws(ExpressionError) {
        let start = position
        var isInteger = true
        skipDigits()
        if character(at: position) == ".", character(at: position + 1)?.isExpressionDigit == true {
            isInteger = false
            position += 1
            skipDigits()
        }
        if let marker = character(at: position), marker == "e" || marker == "E" {
            var digitsStart = position + 1
            if let sign = character(at: digitsStart), sign == "+" || sign == "-" { digitsStart += 1 }
            if character(at: digitsStart)?.isExpressionDigit == true {
                isInteger = false
                position = digitsStart
                skipDigits()
            }
        }
        if let next = character(at: position), next.isExpressionIdentifierPart {
            throw .syntax("unexpected '\(next)' after the number", at: column(position))
        }
        let text = String(characters[start..<position])
        let value: JSONValue
        if isInteger {
            guard let integer = Int64(text) else {
                throw .syntax("the integer \(text) does not fit in 64 bits", at: column(start))
            }
            value = .int(integer)
        } else {
            guard let number = Double(text), number.isFinite else {
                throw .syntax("the number \(text) is out of range", at: column(start))
            }
            value = .double(number)
        }
        tokens.append(ExpressionToken(kind: .literal(value), column: column(start)))
    }

    private mutating func skipDigits() {
        while character(at: position)?.isExpressionDigit == true { position += 1 }
    }

    /// Reads `[A-Za-z0-9_]*` (the caller has checked the first character).
    private mutating func readWord() -> String {
        let start = position
        while character(at: position)?.isExpressionIdentifierPart == true { position += 1 }
        return String(characters[start..<position])
    }

    /// Reads the `.key` segments after a key path's first key or a variable's name: a key is
    /// `[A-Za-z0-9_]+` or, when `operators` allows, `@` and a name.
    private mutating func readKeys(operators: Bool) throws(ExpressionError) -> [String] {
        var keys: [String] = []
        while character(at: position) == "." {
            let keyStart = position + 1
            guard let first = character(at: keyStart) else {
                throw .syntax("expected a key after '.'", at: column(keyStart))
            }
            position = keyStart
            if first.isExpressionIdentifierPart {
                keys.append(readWord())
            } else if first == "@" {
                guard operators else {
                    throw .syntax("collection operators apply to key paths, not to variables", at: column(keyStart))
                }
                position += 1
                guard character(at: position)?.isExpressionIdentifierStart == true else {
                    throw .syntax("expected a collection operator name after '@'", at: column(position))
                }
                keys.append("@" + readWord())
            } else {
                throw .syntax("expected a key after '.', found '\(first)'", at: column(keyStart))
            }
        }
        return keys
    }

    private mutating func lexKeyPathOrKeyword() throws(ExpressionError) {
        let start = position
        let first = readWord()
        let keys = try readKeys(operators: true)
        if let keyword = ExpressionToken.Keyword(rawValue: first) {
            guard keys.isEmpty else {
                throw .syntax("'\(first)' is a keyword and cannot start a key path", at: column(start))
            }
            tokens.append(ExpressionToken(kind: .keyword(keyword), column: column(start)))
            return
        }
        let text = ([first] + keys).joined(separator: ".")
        let path: KeyPath
        do {
            path = try KeyPath(text)
        } catch {
            throw .syntax(error.message, at: column(start))
        }
        tokens.append(ExpressionToken(kind: .keyPath(path), column: column(start)))
    }

    private mutating func lexVariable() throws(ExpressionError) {
        let start = position
        position += 1
        guard let first = character(at: position) else {
            throw .syntax("expected a variable name after '$'", at: column(position))
        }
        let name: String
        if first.isExpressionIdentifierStart {
            name = readWord()
        } else if first.isExpressionDigit {
            let digitsStart = position
            skipDigits()
            name = String(characters[digitsStart..<position])
            if let next = character(at: position), next.isExpressionIdentifierPart {
                throw .syntax("unexpected '\(next)' in the variable name", at: column(position))
            }
        } else {
            throw .syntax("expected a variable name after '$', found '\(first)'", at: column(position))
        }
        let keys = try readKeys(operators: false)
        tokens.append(ExpressionToken(kind: .variable(name: name, keys: keys), column: column(start)))
    }

    /// Reads a string in `quote`s with the escapes \\ \' \" \n \t and \uXXXX (a UTF-16 surrogate
    /// pair as two escapes).
    private mutating func lexString(quote: Character) throws(ExpressionError) {
        let start = position
        position += 1
        var text = String.UnicodeScalarView()
        while true {
            guard let current = character(at: position) else {
                throw .syntax("unterminated string", at: column(start))
            }
            if current == quote {
                position += 1
                break
            }
            guard current == "\\" else {
                text.append(contentsOf: current.unicodeScalars)
                position += 1
                continue
            }
            let escapeStart = position
            position += 1
            switch character(at: position) {
            case "\\": text.append("\\")
            case "'": text.append("'")
            case "\"": text.append("\"")
            case "n": text.append("\n")
            case "t": text.append("\t")
            case "u":
                position += 1
                text.append(try readUnicodeEscape(escapeStart: escapeStart))
                continue
            case nil:
                throw .syntax("unterminated string", at: column(start))
            case let other?:
                throw .syntax("unknown escape '\\\(other)'", at: column(escapeStart))
            }
            position += 1
        }
        tokens.append(ExpressionToken(kind: .literal(.string(String(text))), column: column(start)))
    }

    /// Reads the XXXX of `\uXXXX` (and, for a high surrogate, the `\uXXXX` of its low half).
    private mutating func readUnicodeEscape(escapeStart: Int) throws(ExpressionError) -> Unicode.Scalar {
        let high = try readHexQuad(escapeStart: escapeStart)
        if let scalar = Unicode.Scalar(high) { return scalar }
        // A surrogate: only a high one followed by an escaped low one makes a scalar.
        guard (0xD800...0xDBFF).contains(high), character(at: position) == "\\",
              character(at: position + 1) == "u" else {
            throw .syntax("\\u\(String(high, radix: 16, uppercase: true)) is half of a surrogate pair", at: column(escapeStart))
        }
        let lowStart = position
        position += 2
        let low = try readHexQuad(escapeStart: lowStart)
        guard (0xDC00...0xDFFF).contains(low),
              let scalar = Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)) else {
            throw .syntax("\\u\(String(high, radix: 16, uppercase: true)) is half of a surrogate pair", at: column(escapeStart))
        }
        return scalar
    }

    private mutating func readHexQuad(escapeStart: Int) throws(ExpressionError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = character(at: position)?.hexDigitValue, character(at: position)?.isASCII == true else {
                throw .syntax("expected four hexadecimal digits after '\\u'", at: column(escapeStart))
            }
            value = value * 16 + UInt32(digit)
            position += 1
        }
        return value
    }
}

extension Character {
    /// `0`…`9`.
    fileprivate var isExpressionDigit: Bool {
        guard let ascii = asciiValue else { return false }
        return ascii >= UInt8(ascii: "0") && ascii <= UInt8(ascii: "9")
    }

    /// `A`…`Z`, `a`…`z`, `_`.
    fileprivate var isExpressionIdentifierStart: Bool {
        guard let ascii = asciiValue else { return false }
        return (ascii >= UInt8(ascii: "a") && ascii <= UInt8(ascii: "z"))
            || (ascii >= UInt8(ascii: "A") && ascii <= UInt8(ascii: "Z")) || ascii == UInt8(ascii: "_")
    }

    /// An identifier character or a digit.
    fileprivate var isExpressionIdentifierPart: Bool { isExpressionIdentifierStart || isExpressionDigit }
}
