// The domain an executable or an embedding app works with comes through this module, as
// Hummingbird's does through `Hummingbird`: the accounts, jobs and photo recipe, never a
// backend or a blob store by name (those are chosen by `LifecycleConfiguration`).
@_exported import Imaging
@_exported import JobRunner
@_exported import Lifecycle
