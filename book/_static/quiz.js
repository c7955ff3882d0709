/* Self-check quizzes (lab/quiz.py writes the markup). No network, no dependencies.
 *
 * Markup: .lab-quiz[data-quiz] > .lab-quiz-question[data-answer] with buttons [data-option] and a
 * hidden [data-feedback] block. Clicking an option commits the answer: the buttons lock, the chosen
 * one is marked right or wrong, the right one is shown, and the explanation appears. "Try again"
 * resets the question. One delegated listener serves every quiz on the page, including quizzes
 * added later (a live Jupyter output), and installing twice is harmless.
 */
(function () {
  "use strict";
  if (window.labQuizInstalled) return;
  window.labQuizInstalled = true;

  var LETTERS = "ABCDEFGH";

  function commit(question, chosen) {
    if (question.getAttribute("data-committed")) return;
    var answer = parseInt(question.getAttribute("data-answer"), 10);
    var buttons = question.querySelectorAll("[data-option]");
    for (var i = 0; i < buttons.length; i++) {
      var index = parseInt(buttons[i].getAttribute("data-option"), 10);
      buttons[i].disabled = true;
      if (index === answer) buttons[i].classList.add("lab-quiz-right");
      if (index === chosen && chosen !== answer) buttons[i].classList.add("lab-quiz-wrong");
      if (index === chosen) buttons[i].setAttribute("aria-pressed", "true");
    }
    var right = chosen === answer;
    question.setAttribute("data-committed", right ? "right" : "wrong");
    var feedback = question.querySelector("[data-feedback]");
    var verdict = feedback.querySelector("[data-verdict]");
    verdict.textContent = right ? "Right." : "Not quite: the answer is " + LETTERS.charAt(answer) + ".";
    verdict.className = "lab-quiz-verdict " + (right ? "lab-quiz-verdict-right" : "lab-quiz-verdict-wrong");
    if (!feedback.querySelector(".lab-quiz-retry")) {
      var retry = document.createElement("button");
      retry.type = "button";
      retry.className = "lab-quiz-retry";
      retry.textContent = "Try again";
      feedback.appendChild(retry);
    }
    feedback.hidden = false;
    // the chosen button is now disabled, which drops keyboard focus to the page body: keep the reader here
    verdict.setAttribute("tabindex", "-1");
    verdict.focus({ preventScroll: true });
  }

  function reset(question) {
    question.removeAttribute("data-committed");
    var buttons = question.querySelectorAll("[data-option]");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].disabled = false;
      buttons[i].classList.remove("lab-quiz-right", "lab-quiz-wrong");
      buttons[i].removeAttribute("aria-pressed");
    }
    question.querySelector("[data-feedback]").hidden = true;
  }

  // feedback is announced when it appears (a screen reader hears "Right." or the answer)
  function announceFeedback() {
    var blocks = document.querySelectorAll("[data-quiz] [data-feedback]");
    for (var i = 0; i < blocks.length; i++) blocks[i].setAttribute("aria-live", "polite");
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", announceFeedback);
  else announceFeedback();

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (!target || !target.closest) return;
    var question = target.closest(".lab-quiz-question");
    if (!question || !question.closest("[data-quiz]")) return;
    var option = target.closest("[data-option]");
    if (option) {
      commit(question, parseInt(option.getAttribute("data-option"), 10));
    } else if (target.closest(".lab-quiz-retry")) {
      reset(question);
      var first = question.querySelector("[data-option]");
      if (first) first.focus();
    }
  });
})();
