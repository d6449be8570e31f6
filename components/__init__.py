"""gpu-platform components: one ComponentResource per platform concern, plus pure builders."""
