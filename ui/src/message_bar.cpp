// MainWindow's message bar: non-blocking messages in a strip of their own under the views, with
// buttons offering the way on, "More…" for a long message, and info messages that fade.
#include <QFrame>
#include <QHBoxLayout>
#include <QLabel>
#include <QLayout>
#include <QMessageBox>
#include <QPushButton>
#include <QToolButton>

#include "main_window.h"

namespace snip::ui {

namespace {
constexpr int kInfoMessageMs = 8000;  // info messages fade; warnings and errors stay until closed
}  // namespace

void MainWindow::make_message_bar(QWidget* central) {
  // Message bar: non-blocking, closable, in a strip of its own under the views whose height never
  // changes: two lines of text beside a button, whether or not a message is shown. So it never
  // covers a control (a bar floating over the views did) and a message coming and going never
  // moves a button under the mouse. A longer message shows its first lines and a "More…" button.
  message_strip_ = new QWidget(central);
  auto* bar_frame = new QFrame(message_strip_);
  bar_frame->setFrameStyle(QFrame::StyledPanel | QFrame::Raised);
  message_bar_ = bar_frame;
  message_bar_->setAutoFillBackground(true);
  auto* bar_layout = new QHBoxLayout(message_bar_);
  message_layout_ = bar_layout;
  bar_layout->setContentsMargins(8, 4, 4, 4);
  message_label_ = new QLabel(message_bar_);
  message_label_->setWordWrap(true);
  message_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* close_button = new QToolButton(message_bar_);
  close_button->setText(QStringLiteral("✕"));
  close_button->setAutoRaise(true);
  close_button->setToolTip(tr("Dismiss"));
  message_more_ = new QPushButton(tr("More…"), message_bar_);
  message_more_->setToolTip(tr("The whole message"));
  message_more_->hide();
  connect(message_more_, &QPushButton::clicked, this, [this] {
    QMessageBox box(message_level_ == MessageLevel::error     ? QMessageBox::Critical
                    : message_level_ == MessageLevel::warning ? QMessageBox::Warning
                                                              : QMessageBox::Information,
                    tr("SNIP Workbench"), message_label_->toolTip(), QMessageBox::Ok, this);
    box.setTextInteractionFlags(Qt::TextSelectableByMouse);
    box.exec();
  });
  bar_layout->addWidget(message_label_, 1);
  bar_layout->addWidget(message_more_);
  bar_layout->addWidget(close_button);
  message_bar_->hide();
  connect(close_button, &QToolButton::clicked, message_bar_, &QWidget::hide);
  message_hide_timer_.setSingleShot(true);
  connect(&message_hide_timer_, &QTimer::timeout, message_bar_, &QWidget::hide);
  connect(workbench_, &Workbench::message, this, &MainWindow::show_message);
  connect(workbench_, &Workbench::settled, this, &MainWindow::settle_message);
}

void MainWindow::add_message_action(const QString& label, std::function<void()> action) {
  auto* button = new QPushButton(label, message_bar_);
  // Before the close button.
  message_layout_->insertWidget(message_layout_->count() - 1, button);
  message_actions_.append(button);
  connect(button, &QPushButton::clicked, this, [action = std::move(action)] { action(); });
  place_message_bar();
}

QString MainWindow::message_text() const {
  return message_bar_->isVisible() ? message_label_->text() : QString();
}

void MainWindow::settle_message(MessageSubject subject) {
  if (subject != MessageSubject::other && message_subject_ == subject) {
    message_hide_timer_.stop();
    message_bar_->hide();
    message_subject_ = MessageSubject::other;
  }
}

void MainWindow::show_message(MessageLevel level, const QString& text_in, MessageSubject subject) {
  // Every message passes here, whoever made it (the worker, the store, a view): said in GUI terms.
  const QString text = gui_wording(text_in);
  QPalette pal = palette();
  QColor bg = pal.color(QPalette::AlternateBase);
  QString prefix;
  switch (level) {
    case MessageLevel::info:
      prefix = tr("ℹ ");
      break;
    case MessageLevel::warning:
      bg = QColor(255, 214, 102);
      prefix = tr("⚠ ");
      break;
    case MessageLevel::error:
      bg = QColor(240, 128, 128);
      prefix = tr("✖ ");
      break;
  }
  if (level != MessageLevel::info) {
    pal.setColor(QPalette::Window, bg);
    pal.setColor(QPalette::WindowText, Qt::black);
  } else {
    pal.setColor(QPalette::Window, pal.color(QPalette::AlternateBase));
  }
  message_bar_->setPalette(pal);
  message_label_->setPalette(pal);
  message_label_->setText(prefix + text);
  for (QPushButton* b : message_actions_) {
    b->hide();  // gone now, deleted when the event loop comes round
    b->deleteLater();
  }
  message_actions_.clear();
  message_label_->setToolTip(text);
  message_level_ = level;
  message_subject_ = subject;
  message_more_->hide();
  message_bar_->show();
  place_message_bar();
  // More than the strip's two lines: the whole text one click away.
  // (The label's own width is not laid out yet here: the room it gets beside the buttons.)
  const int room = std::max(message_strip_->width(), width()) - 8 -
                   message_more_->sizeHint().width() * (2 + int(message_actions_.size()));
  message_more_->setVisible(message_label_->heightForWidth(std::max(100, room)) >
                            2 * message_label_->fontMetrics().lineSpacing());
  if (level == MessageLevel::info)
    message_hide_timer_.start(kInfoMessageMs);
  else
    message_hide_timer_.stop();
}

void MainWindow::place_message_bar() {
  // In the layout: a new button or a longer text re-lays the strip at once (the offer of a quick
  // start on an empty database showed its button only after a resize when the bar floated).
  message_strip_->updateGeometry();
  if (QLayout* l = message_strip_->layout()) l->activate();
}

}  // namespace snip::ui
