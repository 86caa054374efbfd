// The words of an API answer for a person: the API answers JSON ({"detail": "..."} or
// {"field": ["field: message"]}); a page shows its sentences, never the raw JSON.
function apiMessage(xhr) {
  let body;
  try {
    body = JSON.parse(xhr.responseText);
  } catch (error) {
    return xhr.status ? `the server answered ${xhr.status} ${xhr.statusText}` : "the server could not be reached";
  }
  if (body && typeof body.detail === "string") return body.detail;
  if (body && typeof body === "object") {
    return Object.entries(body)
      .map(([field, messages]) => [].concat(messages).map((m) => (typeof m === "string" ? m : `${field}: ${JSON.stringify(m)}`)).join("; "))
      .join("; ");
  }
  return String(body);
}

// The outcome of the Wake button: which models were woken, or why not.
function showWakeResult(event, target) {
  const xhr = event.detail.xhr;
  const box = document.getElementById(target);
  if (event.detail.successful) {
    const woken = Object.entries(JSON.parse(xhr.responseText).woken || {});
    box.textContent = "Wake requested: " + woken.map(([name, outcome]) => `${name} (${outcome})`).join(", ");
    box.className = "message";
  } else {
    box.textContent = "Wake failed: " + apiMessage(xhr);
    box.className = "errorlist";
  }
}
