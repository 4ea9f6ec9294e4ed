// Login form: posts JSON to /api/auth/login; the session cookie is set by the server.
const form = document.getElementById("login-form");
const error = document.getElementById("login-error");

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  error.textContent = "";
  const name = form.elements.name.value.trim();
  const body = { password: form.elements.password.value };
  if (name) body.name = name;
  const button = form.querySelector("button");
  button.disabled = true;
  try {
    const response = await fetch("/api/auth/login", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
    if (response.ok) {
      // Back to where an expired session left off (the thread, whose draft is kept locally).
      const back = localStorage.getItem("hearth.return") || "";
      localStorage.removeItem("hearth.return");
      window.location.assign(`/${/^#[a-z0-9-]*$/.test(back) ? back : ""}`);
      return;
    }
    let detail = `Login failed (${response.status})`;
    try {
      detail = (await response.json()).detail || detail;
    } catch (_) {
      // not JSON: keep the status line
    }
    error.textContent = detail;
    form.elements.password.select();
  } catch (_) {
    error.textContent = "The server could not be reached.";
  } finally {
    button.disabled = false;
  }
});
