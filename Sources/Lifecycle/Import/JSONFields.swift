import Foundation
import JobRunner

/// Typed, path-aware access to one JSON object of an import line, so every
/// error names the exact field ("entries[2].photos[0].file: …").
struct JSONFields {
    let values: [String: JSONValue]
    let path: String

    init(_ value: JSONValue?, path: String) throws(ValidationFailure) {
        guard case .object(let values) = value else {
            throw ValidationFailure(path.isEmpty ? "line" : path, "must be a JSON object")
        }
        self.values = values
        self.path = path
    }

    func name(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func requireOnly(_ allowed: Set<String>) throws(ValidationFailure) {
        let unknown = Set(values.keys).subtracting(allowed).sorted()
        guard unknown.isEmpty else {
            throw ValidationFailure(TextRules.escapingControls(name(unknown[0])), "is not a known field (known here: \(allowed.sorted().joined(separator: ", ")))")
        }
    }

    private func present(_ key: String) -> JSONValue? {
        guard let value = values[key] else { return nil }
        if case .null = value { return nil }
        return value
    }

    func string(_ key: String) throws(ValidationFailure) -> String {
        guard let value = try optionalString(key) else { throw ValidationFailure(name(key), "is required") }
        return value
    }

    /// A one-line value (a name, an id, a time): no control character at all, so it can
    /// never add a line to a mail, a log or a CSV export.
    func optionalString(_ key: String) throws(ValidationFailure) -> String? {
        guard let text = try rawString(key) else { return nil }
        try TextRules.requireNoControls(text, field: name(key), allowingLineBreaks: false)
        return text
    }

    /// Free text a user typed (a bio, a journal entry): tabs and line breaks are kept,
    /// every other control character is refused rather than stored or cut off.
    func optionalText(_ key: String) throws(ValidationFailure) -> String? {
        guard let text = try rawString(key) else { return nil }
        try TextRules.requireNoControls(text, field: name(key), allowingLineBreaks: true)
        return text
    }

    private func rawString(_ key: String) throws(ValidationFailure) -> String? {
        guard let value = present(key) else { return nil }
        guard case .string(let text) = value else { throw ValidationFailure(name(key), "must be a string") }
        return text
    }

    func optionalBool(_ key: String) throws(ValidationFailure) -> Bool? {
        guard let value = present(key) else { return nil }
        guard case .bool(let flag) = value else { throw ValidationFailure(name(key), "must be true or false") }
        return flag
    }

    func optionalInt(_ key: String) throws(ValidationFailure) -> Int? {
        guard let value = present(key) else { return nil }
        guard case .number(let number) = value, let exact = Int(exactly: number) else {
            throw ValidationFailure(name(key), "must be a whole number")
        }
        return exact
    }

    func date(_ key: String) throws(ValidationFailure) -> Date {
        guard let value = try optionalDate(key) else { throw ValidationFailure(name(key), "is required") }
        return value
    }

    func optionalDate(_ key: String) throws(ValidationFailure) -> Date? {
        guard let text = try rawString(key) else { return nil }
        guard let date = ISO8601.parse(text) else {
            throw ValidationFailure(name(key), "must be an ISO-8601 timestamp like 2025-01-02T03:04:05Z (got \(ProfileRules.quoted(text)))")
        }
        return date
    }

    func object(_ key: String) throws(ValidationFailure) -> JSONFields? {
        guard let value = present(key) else { return nil }
        return try JSONFields(value, path: name(key))
    }

    func array(_ key: String) throws(ValidationFailure) -> [JSONFields] {
        guard let value = present(key) else { return [] }
        guard case .array(let items) = value else { throw ValidationFailure(name(key), "must be an array") }
        var result: [JSONFields] = []
        for (index, item) in items.enumerated() {
            result.append(try JSONFields(item, path: "\(name(key))[\(index)]"))
        }
        return result
    }
}
