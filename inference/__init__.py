"""Hit Enter's model side: loading, the step engine, sampling, payloads. No Django imports, ever."""
