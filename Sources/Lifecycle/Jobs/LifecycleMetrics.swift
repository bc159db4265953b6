import Metrics

/// The domain's figures, through swift-metrics (see JobRunner's RunnerMetrics): counted
/// where the work commits, so a step repeated after a crash may count once more.
enum LifecycleMetrics {
    static func accountPurged(blobs: Int, blobBytes: Int64, rows: Int) {
        Counter(label: "lifecycle_accounts_purged_total").increment()
        Counter(label: "lifecycle_purged_rows_total").increment(by: rows)
        Counter(label: "lifecycle_purged_blobs_total").increment(by: blobs)
        Counter(label: "lifecycle_purged_blob_bytes_total").increment(by: blobBytes)
    }

    static func exportReady(bytes: Int64) {
        Counter(label: "lifecycle_exports_ready_total").increment()
        Counter(label: "lifecycle_export_bytes_total").increment(by: bytes)
    }
}
