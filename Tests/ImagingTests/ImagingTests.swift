import Testing

/// Every Imaging test runs under this suite, one at a time: the leak check
/// counts libvips objects process-wide, which parallel tests would disturb,
/// and the machine has two cores that the fixture tools also need.
@Suite(.serialized)
struct ImagingTests {}
