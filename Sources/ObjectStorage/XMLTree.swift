import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// S3's answers are small XML documents; a tree of elements (namespaces dropped) is
/// all the store reads from them.
struct XMLElement: Sendable {
    var name: String
    var text: String = ""
    var children: [XMLElement] = []

    func child(_ name: String) -> XMLElement? { children.first { $0.name == name } }
    func all(_ name: String) -> [XMLElement] { children.filter { $0.name == name } }
    func value(_ name: String) -> String? { child(name)?.text }

    static func parse(_ data: Data) -> XMLElement? {
        let delegate = TreeBuilder()
        let parser = XMLParser(data: data)
        parser.delegate = delegate
        guard parser.parse(), let root = delegate.root else { return nil }
        return root
    }

    /// Escapes text for element content, scalar by scalar: "\r\n" is one `Character`.
    /// Tab, line feed and carriage return go as references, which a parser keeps as they
    /// are (a literal carriage return would come back as a line feed).
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\t": out += "&#9;"
            case "\n": out += "&#10;"
            case "\r": out += "&#13;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Whether XML 1.0 can carry the text at all, escaped or not: it has no way to write
    /// most C0 control characters, nor U+FFFE and U+FFFF.
    static func canCarry(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { scalar in
            switch scalar.value {
            case 0x9, 0xA, 0xD, 0x20...0xD7FF, 0xE000...0xFFFD, 0x10000...: true
            default: false
            }
        }
    }
}

private final class TreeBuilder: NSObject, XMLParserDelegate {
    var stack: [XMLElement] = []
    var root: XMLElement?

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
        let local = elementName.split(separator: ":").last.map(String.init) ?? elementName
        stack.append(XMLElement(name: local))
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard !stack.isEmpty else { return }
        stack[stack.count - 1].text += string
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        guard let finished = stack.popLast() else { return }
        if stack.isEmpty {
            root = finished
        } else {
            stack[stack.count - 1].children.append(finished)
        }
    }
}
