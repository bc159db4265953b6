import Foundation

/// Any JSON value, keeping booleans and numbers apart (JSONSerialization on Linux does
/// not): for reading untrusted JSON strictly, and for handing on JSON that was stored as
/// text (a job's payload, a step's output, an audit detail) as a nested object rather
/// than as a string holding JSON.
public enum JSONValue: Codable, Sendable, Equatable {
    case null, bool(Bool), number(Double), string(String), array([JSONValue]), object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let flag = try? container.decode(Bool.self) { self = .bool(flag) }
        else if let number = try? container.decode(Double.self) { self = .number(number) }
        else if let text = try? container.decode(String.self) { self = .string(text) }
        else if let items = try? container.decode([JSONValue].self) { self = .array(items) }
        else { self = .object(try container.decode([String: JSONValue].self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let flag): try container.encode(flag)
        case .number(let number):
            // Whole numbers (ids, counts) print as integers, not as 12.0.
            if number.rounded() == number, abs(number) < 9.0e15 { try container.encode(Int64(number)) } else { try container.encode(number) }
        case .string(let text): try container.encode(text)
        case .array(let items): try container.encode(items)
        case .object(let members): try container.encode(members)
        }
    }

    public static func int(_ value: some BinaryInteger) -> JSONValue { .number(Double(value)) }

    /// `text` parsed as JSON; text that is not JSON stays a string, so nothing stored is lost.
    public static func parsing(_ text: String) -> JSONValue {
        (try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))) ?? .string(text)
    }

    /// The value with its object keys in snake_case (`accountID` → `account_id`,
    /// `inputSHA256` → `input_sha256`), as every `--json` shows keys. Members named in
    /// `keepingKeysUnder` hold data as keys (a receipt's `rows`, an export's `row_counts`:
    /// table names, which may be an app's mixed-case ones), which stay as they are.
    public func snakeCased(keepingKeysUnder dataKeyed: Set<String> = ["rows", "row_counts"]) -> JSONValue {
        switch self {
        case .array(let items): return .array(items.map { $0.snakeCased(keepingKeysUnder: dataKeyed) })
        case .object(let members):
            var converted: [String: JSONValue] = [:]
            for (key, value) in members {
                let name = Self.snakeCase(key)
                converted[name] = dataKeyed.contains(name) ? value : value.snakeCased(keepingKeysUnder: dataKeyed)
            }
            return .object(converted)
        default: return self
        }
    }

    /// `accountID` → `account_id`, `HTTPStatus` → `http_status`, `jobIDs` → `job_ids`, `sha256` stays.
    static func snakeCase(_ key: String) -> String {
        let characters = Array(key)
        var result = ""
        for (index, character) in characters.enumerated() {
            if character.isUppercase, index > 0 {
                let previous = characters[index - 1]
                // An acronym ends where a word begins (HTTP|Status), not before a plural "s" (ID|s).
                let word = characters[(index + 1)...].prefix { $0.isLowercase }
                let startsWord = word.count > 1 || (word.count == 1 && word.first != "s")
                if previous.isLowercase || previous.isNumber || (previous.isUppercase && startsWord) {
                    if !result.hasSuffix("_") { result.append("_") }
                }
            }
            result.append(contentsOf: character.lowercased())
        }
        return result
    }
}
