// While the server loads its model (the first start converts SmolLM2's GGUF), show how far it got.
import { fill, gettext, pageLanguage, withLanguage } from "./lib/i18n.js";

const POLL_MS = 1000;

async function poll(box) {
  const text = box.querySelector(".model-progress");
  const bar = box.querySelector(".model-progress-bar");
  for (;;) {
    let state;
    try {
      // ?lang=: the progress label and a load error are the server's sentences, said in the page's language
      const response = await fetch(withLanguage("/api/model", pageLanguage), { credentials: "same-origin" });
      state = await response.json();
    } catch {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS * 3));
      continue;
    }
    if (state.error) { text.textContent = fill(gettext("The model could not be loaded: %(error)s"), { error: state.error }); return; }
    if (!state.loading) {
      text.textContent = state.name ? fill(gettext("Loaded: %(name)s. Press Play."), { name: state.name }) : gettext("Loaded. Press Play.");
      bar.value = 1;
      box.dataset.loaded = "true";
      box.querySelector(".model-loading-lead")?.remove(); // "still loading" is no longer true
      return;
    }
    if (state.progress) { text.textContent = state.progress.what; bar.value = state.progress.done; }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

function init() {
  const box = document.querySelector(".model-loading");
  if (box) poll(box);
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();
