"""Hit Enter's model side: loading, the step engine, sampling, payloads. No Django imports, ever."""
import os

# OpenMP threads that wait at a barrier sleep instead of spinning. Spinning is faster on an idle machine by a
# hair; on a shared one (a laptop, a classroom box, CI) a spinning thread eats the core its partner needs:
# SmolLM2's decode measured 1.4-2.3 s spinning against 80 ms sleeping on this 2-core box under load. Read
# once, when torch loads OpenMP: before torch is imported (the server imports torch through this package).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
