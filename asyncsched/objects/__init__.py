"""Request model: nova's versioned objects as frozen values, and the codec for them."""
