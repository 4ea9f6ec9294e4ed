"""The companion reaching out: check-ins, SMS and email channels, voice (SPEC 11, 17)."""
