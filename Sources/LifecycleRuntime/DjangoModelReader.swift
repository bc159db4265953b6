import Foundation
import Lifecycle

/// Reads what deleting a user means in a Django project from Django itself: the project's
/// own `manage.py shell` runs `script` (nothing to install in the project), which walks the
/// model registry the way Django's deletion collector does and writes every relation's
/// `on_delete`, the many-to-many tables, the generic relations, the file fields and the
/// user model as JSON (`RelationGraph`).
public struct DjangoModelReader: Sendable {
    public var managePy: String
    /// The project's interpreter (its virtualenv's `python`).
    public var python: String
    /// Extra variables for the project's settings (its database, its media folder).
    public var environment: [String: String]

    public init(managePy: String, python: String, environment: [String: String] = [:]) {
        self.managePy = managePy
        self.python = python
        self.environment = environment
    }

    /// The project's models as a relation graph. Exit 66 when manage.py is missing, 69
    /// when the interpreter cannot run, 65 naming Django's own error when the project fails
    /// to load (a settings error, a missing app).
    public func read() throws -> RelationGraph {
        let script = URL(fileURLWithPath: managePy)
        guard FileManager.default.isReadableFile(atPath: script.path) else {
            throw LifecycleError(.inputMissing, "\(managePy) does not exist: --django names the project's manage.py")
        }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("lifecycle-models-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: output) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python.contains("/") ? python : "/usr/bin/env")
        process.arguments = (python.contains("/") ? [] : [python]) + [script.path, "shell", "-c", Self.script]
        process.currentDirectoryURL = script.deletingLastPathComponent()
        var environment = ProcessInfo.processInfo.environment.merging(self.environment) { _, new in new }
        environment["LIFECYCLE_MODEL_GRAPH"] = output.path
        environment["PYTHONDONTWRITEBYTECODE"] = "1"
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        // Nothing to answer: a project that asks (a prompt in its settings) ends instead of waiting.
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw LifecycleError(.unavailable, "cannot run \(python) (\(error)): --python names the project's interpreter, its virtualenv's bin/python")
        }
        let stderr = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        // Bounded: a project's models fit in a few megabytes; anything larger is not this script's.
        let size = (try? FileManager.default.attributesOfItem(atPath: output.path)[.size] as? Int) ?? 0
        guard size <= Self.largestGraph else {
            throw LifecycleError(.badInput, "\(managePy) shell wrote \(size) bytes of model metadata, more than the \(Self.largestGraph) lifecycle reads: is the script's output file shared?")
        }
        guard process.terminationStatus == 0, let data = try? Data(contentsOf: output) else {
            let said = String(decoding: stderr.suffix(4000), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw LifecycleError(.badInput, "\(managePy) shell could not read the project's models (exit \(process.terminationStatus)): \(said.isEmpty ? "no message" : said)")
        }
        do {
            return try JSONDecoder().decode(RelationGraph.self, from: data)
        } catch {
            throw LifecycleError(.internalError, "the model reader's output is not what lifecycle expects: \(error)")
        }
    }

    static let largestGraph = 64 << 20

    /// Runs inside `manage.py shell`. Django's `Collector` decides what `user.delete()`
    /// does from each relation's `on_delete` and from every model's GenericRelations; this
    /// writes those same facts down, table by table, for the map to be generated from.
    static let script = #"""
import json, os
from django import get_version
from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import models

ACTIONS = {
    models.CASCADE: "cascade", models.PROTECT: "protect", models.RESTRICT: "restrict",
    models.SET_NULL: "set_null", models.SET_DEFAULT: "set_default", models.DO_NOTHING: "do_nothing",
}

relations, generic, files, labels = [], [], {}, {}
for model in apps.get_models(include_auto_created=True):
    meta = model._meta
    if meta.proxy or meta.swapped:
        continue
    labels[meta.db_table] = meta.label
    for field in meta.local_concrete_fields:
        if isinstance(field, models.FileField):
            files.setdefault(meta.db_table, []).append(field.column)
        if not (field.many_to_one or field.one_to_one) or field.remote_field is None:
            continue
        on_delete = field.remote_field.on_delete
        relation = {
            "table": meta.db_table, "column": field.column,
            "referenced_table": field.remote_field.model._meta.db_table, "referenced_column": field.target_field.column,
            "action": ACTIONS.get(on_delete, "set"), "origin": "%s.%s" % (meta.label, field.name),
            "nullable": field.null, "parent_link": bool(getattr(field.remote_field, "parent_link", False)),
        }
        default = field.get_default() if on_delete is models.SET_DEFAULT else ()
        if default is None or isinstance(default, (bool, int, float, str)):
            # A list of one: a default of null is a constant too, unlike none at all.
            relation["value"] = [default]
        relations.append(relation)
    for field in meta.private_fields:
        # A GenericRelation: Django's delete() takes the related rows with the holder.
        if getattr(field, "bulk_related_objects", None) is None or not hasattr(field, "object_id_field_name"):
            continue
        related = field.related_model._meta
        generic.append({
            "table": related.db_table,
            "object_id_column": related.get_field(field.object_id_field_name).column,
            "type_column": related.get_field(field.content_type_field_name).column,
            "type_table": apps.get_model("contenttypes", "ContentType")._meta.db_table,
            "app_label": meta.app_label, "model": meta.model_name,
            "referenced_table": meta.db_table, "origin": "%s.%s" % (meta.label, field.name),
        })

user = get_user_model()
meta = user._meta
def column(name):
    try:
        return meta.get_field(name).column
    except Exception:
        return None
lookup = [c for c in [column(user.USERNAME_FIELD), column(user.get_email_field_name())] if c]
with open(os.environ["LIFECYCLE_MODEL_GRAPH"], "w") as out:
    json.dump({
        "source": "Django %s models" % get_version(),
        "user": {
            "table": meta.db_table, "key": meta.pk.column, "lookup": list(dict.fromkeys(lookup)),
            "email": column(user.get_email_field_name()), "password": column("password"),
        },
        "relations": relations, "generic": generic, "files": files, "labels": labels,
        "installed_apps": list(settings.INSTALLED_APPS),
    }, out)
"""#
}
