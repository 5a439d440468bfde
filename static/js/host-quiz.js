// The host's side of the class quiz (issue 26): Ask the class at a paused broadcast step, watch the answers come
// in (a live count and histogram, from host_stats every second), Reveal, and the recap downloads.
import { quizTable } from "./lib/quiz-chart.js";
import { fill, gettext } from "./lib/i18n.js";

const $ = (sel) => document.querySelector(sel);
let shown = ""; // what the chart shows now: redrawn only when it changes

/** Whether the class is answering now (the broadcast's run verbs wait for the reveal). */
export function quizOpen(quiz) {
  return quiz?.state === "open";
}

export function bindQuiz(send) {
  $("#btn-ask").addEventListener("click", () => send({ type: "ask" }));
  $("#btn-reveal").addEventListener("click", () => send({ type: "reveal" }));
}

/** The buttons, the line and the chart, from the stats' `quiz` and the broadcast's state. */
export function renderQuiz(quiz, broadcast, following) {
  const open = quizOpen(quiz);
  $("#btn-ask").disabled = open || !broadcast.id || broadcast.state !== "paused";
  $("#btn-reveal").disabled = !open;
  const line = $("#quiz-state");
  if (!quiz) {
    line.textContent = broadcast.state === "paused" ? gettext("Ready: the class guesses the broadcast's next token.")
      : gettext("Pause the broadcast (or start it paused) to ask the class which token comes next.");
  } else if (open) {
    line.textContent = fill(gettext("Step %(step)s: %(answered)s of %(following)s following have answered. "
      + "Nobody, you included, sees the model's odds until you press Reveal."), { step: quiz.step, answered: quiz.answered ?? 0, following });
  } else {
    line.textContent = fill(gettext("Step %(step)s revealed: %(answered)s answered. Ask again at the next paused step."),
      { step: quiz.step, answered: quiz.outcome.answered });
  }
  const drawn = JSON.stringify(quiz ?? null);
  if (drawn === shown) return;
  shown = drawn;
  $("#quiz-chart").replaceChildren(...(quiz ? [quizTable(quiz)] : []));
}
