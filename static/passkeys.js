// Passkeys (issue 18): registering one on the passkeys page, and signing a decision before the
// decision form is posted. The server derives each challenge (governor/services/passkeys.py); this file
// only carries it to the authenticator and its answer back. Without a passkey, with "Sign my
// decision" unchecked, or without JavaScript, the decision form posts unsigned.
(function () {
  "use strict";

  function csrf(form) {
    return form.querySelector("input[name=csrfmiddlewaretoken]").value;
  }

  async function post(form, url, data) {
    const response = await fetch(url, {
      method: "POST", body: data, credentials: "same-origin",
      headers: {"X-CSRFToken": csrf(form)},
    });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  }

  function say(form, message) {
    const line = form.querySelector(".passkey-error");
    line.textContent = message;
    line.hidden = !message;
  }

  function why(error) {
    if (error.name === "NotAllowedError") {
      return "Your authenticator did not sign (cancelled, timed out, or it could not verify you).";
    }
    return error.message || String(error);
  }

  // Registration: options from the server, navigator.credentials.create(), the answer back.
  async function register(form) {
    say(form, "");
    try {
      const options = await post(form, form.dataset.optionsUrl, new FormData());
      const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(options);
      const credential = await navigator.credentials.create({publicKey});
      const data = new FormData();
      data.append("name", form.querySelector("input[name=name]").value);
      data.append("credential", JSON.stringify(credential.toJSON()));
      await post(form, form.dataset.registerUrl, data);
      window.location.reload();
    } catch (error) {
      say(form, "The passkey was not added: " + why(error));
    }
  }

  // A decision: the server issues a challenge for exactly this receipt, stage, decision and
  // reviewer; the authenticator's assertion goes into the form's `assertion` field.
  async function sign(form, submitter) {
    say(form, "");
    const data = new FormData();
    data.append("receipt", form.querySelector("input[name=receipt]").value);
    data.append("decision", submitter.value);
    try {
      const options = await post(form, form.dataset.signUrl, data);
      const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options);
      const credential = await navigator.credentials.get({publicKey});
      form.querySelector("input[name=assertion]").value = JSON.stringify(credential.toJSON());
    } catch (error) {
      say(form, "Nothing was decided: " + why(error) +
          " No passkey on this device? Uncheck “Sign my decision with my passkey”.");
      return;
    }
    form.dataset.signed = "yes";
    form.requestSubmit(submitter);
  }

  function decides(form, submitter) {
    // A first press of Reject only asks for confirmation: nothing to sign yet.
    return submitter.value !== "rejected" || form.querySelector("input[name=confirm]") !== null;
  }

  // Capture phase: runs before htmx's own submit handler on the form, which it may stop.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (form.matches("form.passkey-add")) {
      event.preventDefault();
      register(form);
      return;
    }
    if (!form.matches("form.decide[data-sign-url]")) return;
    if (form.dataset.signed === "yes") {
      delete form.dataset.signed;
      return;
    }
    const submitter = event.submitter;
    if (!submitter || !submitter.value || !decides(form, submitter)) return;
    // The reviewer chose to decide unsigned (no passkey on this device): post as it is.
    const choice = form.querySelector("input[name=sign]");
    if (choice && !choice.checked) return;
    event.preventDefault();
    event.stopPropagation();
    sign(form, submitter);
  }, true);
})();
