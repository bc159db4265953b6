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

    /// Escapes text for element content.
    static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(character)
            }
        }
        return out
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
