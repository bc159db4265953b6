/// The release, as `lifecycle --version` prints it.
public enum LifecycleVersion {
    public static let current = "0.17.0"
}
