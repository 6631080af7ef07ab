import type { Deps } from '../../deps.js';
import type { App } from '../app.js';
import { registerApiRoutes } from './api/index.js';
import { registerDashboardRoutes } from './dashboard.js';
import { registerHealthRoutes } from './health.js';
import { registerTelegramRoutes } from './telegram.js';
import { registerTrackerRoutes } from './tracker.js';

/** Every route group of the service, in one list. */
export function registerRoutes(app: App, deps: Deps): void {
  registerHealthRoutes(app, deps);
  registerTelegramRoutes(app, deps);
  registerTrackerRoutes(app, deps);
  registerApiRoutes(app, deps);
  registerDashboardRoutes(app, deps);
}
